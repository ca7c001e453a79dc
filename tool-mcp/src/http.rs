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
//!
//! What it refuses, by default (each default is sized for a small machine; the guide's security chapter,
//! `docs/guide/src/security.md`, lists them all):
//! - **Foreign pages.** A request whose `Origin` is present and not allowed is answered `403 Forbidden` before it
//!   is read; only loopback origins are allowed by default ([`HttpConfig::allowed_origins`]). A request without
//!   `Origin` (any client that is not a browser) is not affected. With Origin validation on, a public `Host`
//!   allowlist ([`HttpConfig::allowed_hosts`]) does not re-open DNS rebinding.
//! - **Slow or idle connections.** A connection has [`HttpConfig::header_read_timeout`] to send each request's
//!   headers (the first, and each next one on a kept-alive connection), and headers larger than
//!   [`HttpConfig::max_header_bytes`] are answered `431`. A request's body has [`HttpConfig::body_read_timeout`]
//!   to arrive, past which it is answered `408` and its connection closed; while it is read, the request holds the
//!   slot it is to be served under (below), so that slow bodies are held to those caps too.
//! - **Too many connections.** At most [`HttpConfig::max_connections`] in all and
//!   [`HttpConfig::max_connections_per_client`] from one client address; past either, the connection is answered
//!   `503` or `429` with `Retry-After` and closed, without its request being read.
//! - **Too many calls at once.** At most [`HttpConfig::max_calls_per_session`] requests in flight on one session
//!   (`429`), and [`HttpConfig::max_stateless_requests`] requests in flight without a session (`503`), each with
//!   `Retry-After`. A JSON-RPC response or notification (a client answering the server) is never refused.
//! - **Large bodies.** A body is read up to the executor's argument limit ([`keel_tools_core::schema::Limits::max_bytes`],
//!   1 MiB by default; [`HttpConfig::max_body_bytes`]) and refused with `413` past it, before any of it is parsed:
//!   at once when its `Content-Length` says so, else as soon as the bytes read pass the limit.
//! - **Too many requests over time**, when [`HttpConfig::rate_limits`] sets any: a client's requests, and its
//!   calls of a limited tool, past their [`RateLimits`] (`429` with `Retry-After`, none by default).
//!
//! Every request is checked in one fixed order, each check cheaper than the next and refusing before the next runs:
//! `Host` and `Origin`, then the form of its session header, then its bearer token (and the owner of its session),
//! then its body's declared length and the cap it is served under, then its body (within the body deadline), then
//! the rate limits; only then does the SDK read it. The health route and the protected resource metadata come after
//! the first check only. The guide's security chapter ("MCP over HTTP: the order of the checks") says the same.
//!
//! No cap refuses what it has already admitted: a session, connection or call keeps its slot until it ends.
//! The connection caps and the header timeout belong to [`McpHttpService::serve`]; a service mounted in another
//! HTTP stack keeps the rest, and the stack's own server sets those two.

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
use http_body_util::{BodyExt, Full};
use hyper::body::{Body as HttpBody, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
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

mod admission;
#[cfg(feature = "auth")]
pub mod auth;
mod rate;

use admission::{Connections, InFlight, Lingering, RequestSlot};
use rate::{Client, Limiters, Refusal};
pub use rate::{DEFAULT_MAX_RATE_LIMITED_CLIENTS, Quota, RATE_LIMITED, RateLimits};

/// How long open connections get to finish after shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The default cap on open sessions: about 50 MiB of session state at the measured ~50 KB per idle session, which
/// suits a small machine. See [`HttpConfig::max_sessions`].
pub const DEFAULT_MAX_SESSIONS: usize = 1024;

/// The default idle expiry of a session. See [`HttpConfig::session_idle_timeout`].
pub const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// The default `Retry-After` of a refused request or connection. See [`HttpConfig::retry_after`].
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(5);

/// The default time a connection has to send a request's headers. See [`HttpConfig::header_read_timeout`].
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The default time a request's body has to arrive once its headers have. See [`HttpConfig::body_read_timeout`].
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The default cap on a request's headers, start line included: 32 KiB. See [`HttpConfig::max_header_bytes`].
pub const DEFAULT_MAX_HEADER_BYTES: usize = 32 * 1024;

/// The default cap on open connections. See [`HttpConfig::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// The default cap on open connections from one client address. See [`HttpConfig::max_connections_per_client`].
pub const DEFAULT_MAX_CONNECTIONS_PER_CLIENT: usize = 512;

/// The default cap on requests in flight on one session. See [`HttpConfig::max_calls_per_session`].
pub const DEFAULT_MAX_CALLS_PER_SESSION: usize = 64;

/// The default cap on requests in flight without a session. See [`HttpConfig::max_stateless_requests`].
pub const DEFAULT_MAX_STATELESS_REQUESTS: usize = 256;

/// The origins allowed by default: pages served from this machine, on any port.
pub const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

/// The session header of the Streamable HTTP transport (a `HeaderName`, so that a lookup does not parse the name
/// on every request).
const SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");
/// The protocol revision header.
const PROTOCOL_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
#[cfg(feature = "auth")]
const METHOD_HEADER: HeaderName = HeaderName::from_static("mcp-method");
#[cfg(feature = "auth")]
const NAME_HEADER: HeaderName = HeaderName::from_static("mcp-name");

/// The key that names a request's revision in its `_meta`, and a searcher for it built once.
const REVISION_KEY: &[u8] = b"io.modelcontextprotocol/protocolVersion";
static REVISION_KEY_FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(REVISION_KEY));

/// The response body type of the HTTP service.
pub type ResponseBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// How the Streamable HTTP server runs: what it accepts (hosts, origins), its limits, and the SDK's own settings
/// (SSE keep-alive and retry, session mode).
///
/// The defaults suit a server on loopback on a small machine. Behind a reverse proxy, name the public host and the
/// pages allowed to call it, and give the proxy's address the connections it needs (all of them come from it):
///
/// ```
/// use std::time::Duration;
/// use keel_tools_mcp::HttpConfig;
///
/// let config = HttpConfig::default()
///     .allowed_hosts(["mcp.example.com"])
///     .allowed_origins(["https://app.example.com"])
///     .max_connections_per_client(1024)
///     .max_sessions(256)
///     .session_idle_timeout(Some(Duration::from_secs(60)));
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
    health_details: bool,
    header_read_timeout: Option<Duration>,
    body_read_timeout: Option<Duration>,
    max_header_bytes: usize,
    max_connections: usize,
    max_connections_per_client: usize,
    max_calls_per_session: usize,
    max_stateless_requests: usize,
    max_body_bytes: Option<usize>,
    rate_limits: RateLimits,
    #[cfg(feature = "auth")]
    auth: Option<auth::ResourceServer>,
}

/// What a health route answers: `200 OK` when healthy, else `503 Service Unavailable`.
///
/// The body sent is `{"status": "ok"}` or `{"status": "degraded"}`; [`HealthReport::body`] is sent instead only
/// when [`HttpConfig::health_details`] says so, since it may name storage addresses or carry error text.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthReport {
    /// Whether the server is healthy.
    pub healthy: bool,
    /// The detailed JSON body.
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
            sdk: StreamableHttpServerConfig::default()
                .with_allowed_origins(LOOPBACK_ORIGINS)
                .enforce_origin_validation(),
            max_sessions: DEFAULT_MAX_SESSIONS,
            idle_timeout: Some(DEFAULT_SESSION_IDLE_TIMEOUT),
            retry_after: DEFAULT_RETRY_AFTER,
            health: None,
            health_details: false,
            header_read_timeout: Some(DEFAULT_HEADER_READ_TIMEOUT),
            body_read_timeout: Some(DEFAULT_BODY_READ_TIMEOUT),
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_client: DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
            max_calls_per_session: DEFAULT_MAX_CALLS_PER_SESSION,
            max_stateless_requests: DEFAULT_MAX_STATELESS_REQUESTS,
            max_body_bytes: None,
            rate_limits: RateLimits::new(),
            #[cfg(feature = "auth")]
            auth: None,
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

    /// The `Retry-After` sent with every refusal of a cap, rounded up to whole seconds (default
    /// [`DEFAULT_RETRY_AFTER`]).
    pub fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = after;
        self
    }

    /// The `Host` values accepted (default: `localhost`, `127.0.0.1` and `::1`), as host names or `host:port`
    /// authorities. A request naming another host is answered `403`. This guards a server on loopback against DNS
    /// rebinding; a public server names its public host here. Origin validation stays on whatever is allowed here.
    pub fn allowed_hosts(mut self, hosts: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.sdk = self.sdk.with_allowed_hosts(hosts);
        self
    }

    /// Accepts any `Host`. Safe only behind a proxy that checks it, and never on loopback: DNS rebinding is then
    /// stopped by Origin validation alone.
    pub fn allow_any_host(mut self) -> Self {
        self.sdk = self.sdk.disable_allowed_hosts();
        self
    }

    /// The browser origins allowed to call the server (default [`LOOPBACK_ORIGINS`]), each with its scheme:
    /// `"https://app.example.com"` (its default port), `"https://app.example.com:8443"`, or
    /// `"http://localhost:*"` (any port). A request whose `Origin` header is present and matches none is answered
    /// `403`, before it is read; an empty list refuses every request that carries an `Origin`. Requests without
    /// `Origin` (clients that are not browsers) are not affected.
    pub fn allowed_origins(mut self, origins: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let origins = origins.into_iter().map(|o| with_default_port(o.into()));
        self.sdk = self.sdk.with_allowed_origins(origins).enforce_origin_validation();
        self
    }

    /// Turns Origin validation off: any web page the user visits may then call the server through the user's
    /// browser. Only for a server that no browser can reach.
    pub fn allow_any_origin(mut self) -> Self {
        self.sdk = self.sdk.disable_allowed_origins();
        self
    }

    /// How long a connection has to send a request's headers, counted from the connection's start or from the
    /// end of its previous answer (default [`DEFAULT_HEADER_READ_TIMEOUT`]); past it the connection is closed. So
    /// it is also how long a kept-alive connection may stay idle. `None` waits for ever (not advised: a client
    /// that sends half a header then holds a connection until the server stops).
    pub fn header_read_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// How long a request's body may take to arrive, counted from the end of its headers (default
    /// [`DEFAULT_BODY_READ_TIMEOUT`]); past it the request is answered `408 Request Timeout` and its connection is
    /// closed. While its body is read a request already holds the slot it is to be served under (its session's
    /// call slot, or one of the [`HttpConfig::max_stateless_requests`]), so slow bodies are held to those caps as
    /// well as to the connection caps. `None` waits for ever (not advised: a client that sends a head and a byte of
    /// body then holds its connection and its slot until the server stops).
    pub fn body_read_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.body_read_timeout = timeout;
        self
    }

    /// The largest request head, start line and headers together (default [`DEFAULT_MAX_HEADER_BYTES`]); a
    /// larger one is answered `431 Request Header Fields Too Large` and the connection is closed.
    pub fn max_header_bytes(mut self, max: usize) -> Self {
        self.max_header_bytes = max;
        self
    }

    /// The most connections open at once (default [`DEFAULT_MAX_CONNECTIONS`]); one more is answered `503` with
    /// `Retry-After` and closed without being read.
    pub fn max_connections(mut self, max: usize) -> Self {
        self.max_connections = max;
        self
    }

    /// The most connections open at once from one client address (default
    /// [`DEFAULT_MAX_CONNECTIONS_PER_CLIENT`]); one more is answered `429` with `Retry-After` and closed without
    /// being read. Behind a reverse proxy every connection comes from the proxy: set this to
    /// [`HttpConfig::max_connections`] there.
    pub fn max_connections_per_client(mut self, max: usize) -> Self {
        self.max_connections_per_client = max;
        self
    }

    /// The most requests in flight on one session (default [`DEFAULT_MAX_CALLS_PER_SESSION`]), counted from their
    /// arrival to their answer's end; one more is answered `429` with `Retry-After`. The client's answers to the
    /// server's own requests, and its notifications, are never refused.
    pub fn max_calls_per_session(mut self, max: usize) -> Self {
        self.max_calls_per_session = max;
        self
    }

    /// The most requests in flight that belong to no session (default [`DEFAULT_MAX_STATELESS_REQUESTS`]): every
    /// request of protocol 2026-07-28 and the `initialize` of the earlier ones, whatever `Mcp-Session-Id` they
    /// carry, and every request naming a session that is not open. One more is answered `503` with `Retry-After`.
    /// A request takes its place before its body is read, so a body slow to come holds one until the
    /// [`HttpConfig::body_read_timeout`].
    pub fn max_stateless_requests(mut self, max: usize) -> Self {
        self.max_stateless_requests = max.min(Semaphore::MAX_PERMITS);
        self
    }

    /// The largest request body read (default: the executor's argument limit,
    /// [`keel_tools_core::schema::Limits::max_bytes`]); a larger one is answered `413 Payload Too Large` before any of it is
    /// parsed. It replaces the SDK's own `max_request_body_bytes`.
    pub fn max_body_bytes(mut self, max: usize) -> Self {
        self.max_body_bytes = Some(max);
        self
    }

    /// Limits how fast each client may send requests, and call each limited tool (default: no limit). A request
    /// past a limit is answered `429` with `Retry-After` and a JSON-RPC error carrying its id, before anything of
    /// it runs; see [`RateLimits`] for whom a request counts for and what is kept.
    pub fn rate_limits(mut self, limits: RateLimits) -> Self {
        self.rate_limits = limits;
        self
    }

    /// The configured rate limits.
    pub fn get_rate_limits(&self) -> &RateLimits {
        &self.rate_limits
    }

    /// Makes the server an OAuth 2.1 protected resource (feature `auth`): every request to the MCP endpoint needs
    /// a bearer token that `resource`'s verifier accepts, the protected resource metadata is served at
    /// [`ResourceServer::metadata_path`](auth::ResourceServer::metadata_path), and each session belongs to the
    /// principal that opened it. See [`auth`].
    #[cfg(feature = "auth")]
    pub fn auth(mut self, resource: auth::ResourceServer) -> Self {
        self.auth = Some(resource);
        self
    }

    /// Answers `GET path` (e.g. `/health`) with `report()`: `200 OK` and `{"status": "ok"}` when it says healthy,
    /// else `503 Service Unavailable` and `{"status": "degraded"}`, so that a load balancer or an orchestrator can
    /// read it. The report's own body is sent only with [`HttpConfig::health_details`]. Served by
    /// [`McpHttpService::serve`] beside the MCP path; `report` runs on each request and should be cheap.
    pub fn health(
        mut self,
        path: impl Into<String>,
        report: impl Fn() -> HealthReport + Send + Sync + 'static,
    ) -> Self {
        self.health = Some(HealthRoute { path: Arc::from(path.into()), report: Arc::new(report) });
        self
    }

    /// Whether the health route sends its report's whole body (default `false`: only `ok` or `degraded`). The body
    /// may name storage addresses and carry error text, so send it only where the route is not public.
    pub fn health_details(mut self, details: bool) -> Self {
        self.health_details = details;
        self
    }

    /// Changes the SDK's own settings: SSE keep-alive and retry, session mode, and its host and origin lists (the
    /// methods above set those too). Its `legacy_session_mode` decides whether sessions are offered at all; its
    /// cancellation token is replaced by [`McpHttpService::serve`]'s shutdown token, and its
    /// `max_request_body_bytes` by [`HttpConfig::max_body_bytes`].
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

/// An allowed origin without a port means its scheme's default port (as a browser's `Origin` does), not any port.
fn with_default_port(origin: String) -> String {
    let Some((scheme, authority)) = origin.split_once("://") else { return origin };
    // The host ends at an IPv6 literal's `]`; a port, if any, follows the next `:`.
    let after_host = authority.rfind(']').map_or(authority, |end| &authority[end..]);
    let default = match scheme.to_ascii_lowercase().as_str() {
        "https" => 443,
        "http" => 80,
        _ => return origin,
    };
    if after_host.contains(':') || authority.is_empty() || authority.contains('/') {
        origin
    } else {
        format!("{origin}:{default}")
    }
}

tokio::task_local! {
    /// The request the SDK is serving, as the session manager sees it.
    static SCOPE: Scope;
}

/// What the session manager knows of the request it serves.
struct Scope {
    /// Set by [`Sessions::create_session`] when it refused a session for the cap, read by the request's
    /// [`McpHttpService::handle_inner`] to answer 503 instead of the SDK's 500.
    refused: Cell<bool>,
    /// The principal whose request this is, on a protected server: a session it opens is its own.
    #[cfg(feature = "auth")]
    principal: Option<Arc<auth::Principal>>,
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
enum SessionsError {
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
struct Sessions {
    inner: LocalSessionManager,
    permits: Arc<Semaphore>,
    held: Mutex<HashMap<SessionId, SessionSlot>>,
    max: usize,
    /// Whether the server is protected: every session then belongs to a principal.
    protected: bool,
}

/// What an open session holds: its place under the cap, and the count of its requests in flight.
struct SessionSlot {
    _permit: OwnedSemaphorePermit,
    in_flight: Arc<InFlight>,
    /// The subject of the principal that opened the session, on a protected server; `None` on another.
    #[cfg_attr(not(feature = "auth"), allow(dead_code))]
    owner: Option<Arc<str>>,
}

impl SessionSlot {
    fn new(permit: OwnedSemaphorePermit, owner: Option<Arc<str>>) -> SessionSlot {
        SessionSlot { _permit: permit, in_flight: Arc::default(), owner }
    }
}

impl Sessions {
    fn new(max: usize, idle_timeout: Option<Duration>, sse_retry: Option<Duration>, protected: bool) -> Sessions {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = idle_timeout;
        inner.session_config.sse_retry = sse_retry;
        Sessions { inner, permits: Arc::new(Semaphore::new(max)), held: Mutex::new(HashMap::new()), max, protected }
    }

    fn open(&self) -> usize {
        self.max - self.permits.available_permits()
    }

    fn full(&self) -> bool {
        self.permits.available_permits() == 0
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, SessionSlot>> {
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The in-flight count of the open session `id`, if there is one.
    fn in_flight(&self, id: &str) -> Option<Arc<InFlight>> {
        self.held().get(id).map(|slot| slot.in_flight.clone())
    }

    /// Whether the open session `id` belongs to the principal of subject `subject`; `None` for no session.
    #[cfg(feature = "auth")]
    fn owned_by(&self, id: &str, subject: &str) -> Option<bool> {
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

/// keel's Streamable HTTP service: rmcp's transport over an [`McpServer`], with the origins, caps and limits of its
/// [`HttpConfig`]. Cheap to clone (clones share the sessions and the caps). Made by [`McpServer::http_service`];
/// serve it with [`McpHttpService::serve`], or mount it in any HTTP stack as a `tower::Service` (it answers every
/// path it is given).
#[derive(Clone)]
pub struct McpHttpService {
    inner: StreamableHttpService<McpSession, Sessions>,
    sessions: Arc<Sessions>,
    limits: Arc<Limits>,
    health: Option<HealthRoute>,
    #[cfg(feature = "auth")]
    auth: Option<Arc<auth::ResourceServer>>,
    /// The protected resource metadata's path and document, made once (every request's path is compared with it).
    #[cfg(feature = "auth")]
    metadata: Option<Arc<(String, Bytes)>>,
    /// The rate limits, when any is set.
    rates: Option<Arc<Limiters>>,
    /// The `Host` and `Origin` pairs found allowed.
    allowed_pairs: Arc<AllowedPairs>,
    /// The server, for the tool a `tools/call` names: its scopes, and whether its caller may see it.
    server: McpServer,
}

/// The limits of one service, and the count of its stateless requests in flight.
struct Limits {
    retry_after: HeaderValue,
    retry_after_s: u64,
    max_body_bytes: usize,
    max_calls_per_session: usize,
    stateless: Arc<Semaphore>,
    max_stateless_requests: usize,
    header_read_timeout: Option<Duration>,
    body_read_timeout: Option<Duration>,
    max_header_bytes: usize,
    max_connections: usize,
    max_connections_per_client: usize,
    health_details: bool,
}

impl fmt::Debug for McpHttpService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpHttpService")
            .field("sessions", &self.sessions.open())
            .field("max_sessions", &self.sessions.max)
            .finish_non_exhaustive()
    }
}

/// What the service needs to know of a JSON-RPC message before the SDK reads it: its method, whether it has an
/// id, and whether it names its protocol revision in `_meta`. A message with a method and an id is a request; one
/// without a method is the client's answer to the server.
#[derive(serde::Deserialize)]
struct Peek<'a> {
    #[serde(borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
    id: Option<serde::de::IgnoredAny>,
    params: Option<PeekParams>,
}

#[derive(serde::Deserialize)]
struct PeekParams {
    #[serde(rename = "_meta")]
    meta: Option<PeekMeta>,
}

#[derive(serde::Deserialize)]
struct PeekMeta {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
    protocol_version: Option<serde::de::IgnoredAny>,
}

impl Peek<'_> {
    /// Peeks at `body`; a body that is not one JSON-RPC object (a batch, or not JSON) counts as a request that may
    /// be served without a session, and the SDK answers it.
    fn of(body: &[u8]) -> Peek<'_> {
        serde_json::from_slice(body).unwrap_or(Peek {
            method: Some(std::borrow::Cow::Borrowed("")),
            id: Some(serde::de::IgnoredAny),
            params: Some(PeekParams { meta: Some(PeekMeta { protocol_version: Some(serde::de::IgnoredAny) }) }),
        })
    }

    fn is_request(&self) -> bool {
        self.method.is_some() && self.id.is_some()
    }

    /// Whether `body` may name its protocol revision in its `_meta`, told without parsing it: `false` only when the
    /// key is not in it, neither as written nor escaped (a body with no backslash cannot spell it another way). A
    /// session's request that answers `false` keeps its session slot without a second parse of its body, the SDK
    /// serving it in that session (a body that is not JSON included: the SDK answers it there).
    fn may_name_its_revision(body: &[u8]) -> bool {
        memchr::memchr(b'\\', body).is_some() || REVISION_KEY_FINDER.find(body).is_some()
    }

    /// Whether the message names its protocol revision in its `_meta`: the SDK may then serve it without a session
    /// whatever its session header says (a request that negotiates per request), so it is counted as one.
    fn names_its_revision(&self) -> bool {
        self.params.as_ref().and_then(|p| p.meta.as_ref()).is_some_and(|m| m.protocol_version.is_some())
    }
}

/// The 2026-07-28 standard headers of a request: `Mcp-Method`, and `Mcp-Name` for a `tools/call`. rmcp refuses a
/// request whose headers say other than its body.
#[cfg(feature = "auth")]
struct StandardHeaders<'a> {
    method: &'a [u8],
    name: Option<&'a str>,
}

#[cfg(feature = "auth")]
impl<'a> StandardHeaders<'a> {
    /// The request's standard headers; `None` when it has no `Mcp-Method`.
    fn of(parts: &'a hyper::http::request::Parts) -> Option<StandardHeaders<'a>> {
        let method = parts.headers.get(&METHOD_HEADER)?.as_bytes();
        let name = parts.headers.get(&NAME_HEADER).and_then(|v| v.to_str().ok());
        Some(StandardHeaders { method, name })
    }

    /// The tool a `tools/call` names.
    fn tool(&self) -> Option<&'a str> {
        if self.method == b"tools/call" { self.name } else { None }
    }
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

fn health_response(report: &HealthReport, details: bool) -> Response<ResponseBody> {
    let status = if report.healthy { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let body = if details {
        report.body.to_string()
    } else if report.healthy {
        r#"{"status":"ok"}"#.to_owned()
    } else {
        r#"{"status":"degraded"}"#.to_owned()
    };
    response(status, "application/json", body)
}

fn not_found() -> Response<ResponseBody> {
    text_response(StatusCode::NOT_FOUND, "not found\n".to_owned())
}

fn too_large(max_body: usize) -> Response<ResponseBody> {
    text_response(StatusCode::PAYLOAD_TOO_LARGE, format!("Payload Too Large: request body exceeds {max_body} bytes\n"))
}

/// The answer to a body that did not arrive within `timeout`; its connection is closed after it.
fn body_timed_out(timeout: Option<Duration>) -> Response<ResponseBody> {
    let seconds = timeout.map_or(0.0, |t| t.as_secs_f64());
    let mut response = text_response(
        StatusCode::REQUEST_TIMEOUT,
        format!("Request Timeout: the request body did not arrive within {seconds} s\n"),
    );
    response.headers_mut().insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A request whose session header is not text.
fn bad_session_header() -> Response<ResponseBody> {
    text_response(StatusCode::BAD_REQUEST, "Bad Request: the Mcp-Session-Id header is not valid text\n".to_owned())
}

/// [`read_body`] within `timeout`, if there is one.
async fn read_body_within<B>(
    body: B,
    declared: Option<u64>,
    max: usize,
    timeout: Option<Duration>,
) -> Result<Bytes, BodyRefused>
where
    B: HttpBody,
    B::Error: fmt::Display,
{
    let mut read = std::pin::pin!(read_body(body, declared, max));
    // Most bodies are whole by the time their headers have been read: those need no timer.
    let first = std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await;
    if let Poll::Ready(done) = first {
        return done;
    }
    match timeout {
        Some(timeout) => tokio::time::timeout(timeout, read).await.unwrap_or(Err(BodyRefused::TimedOut)),
        None => read.await,
    }
}

/// The most `Host` and `Origin` pairs [`McpHttpService::check_host_and_origin`] remembers as allowed.
const ALLOWED_PAIRS: usize = 16;

/// `Host` and `Origin` pairs the SDK has allowed, so that the same pair is not asked about on every request. The
/// SDK's answer depends on the two headers and the configuration alone, which does not change once the service is
/// made. Only allowed pairs are kept, at most [`ALLOWED_PAIRS`]: a refused one is asked about each time.
#[derive(Default)]
struct AllowedPairs(Mutex<Vec<(HeaderValue, Option<HeaderValue>)>>);

impl AllowedPairs {
    fn contains(&self, host: &HeaderValue, origin: Option<&HeaderValue>) -> bool {
        let pairs = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        pairs.iter().any(|(h, o)| h == host && o.as_ref() == origin)
    }

    fn insert(&self, host: &HeaderValue, origin: Option<&HeaderValue>) {
        let mut pairs = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if pairs.len() < ALLOWED_PAIRS && !pairs.iter().any(|(h, o)| h == host && o.as_ref() == origin) {
            pairs.push((host.clone(), origin.cloned()));
        }
    }
}

/// The body's declared length, when it has one that parses.
fn content_length<B>(request: &Request<B>) -> Option<u64> {
    request.headers().get(hyper::header::CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
}

/// A request's slot before its body is read.
enum Pending {
    /// Taken.
    Held(RequestSlot),
    /// Its session is at its cap of calls in flight: what its body is decides.
    SessionFull,
}

/// The cap that refused a request.
#[derive(Debug, Clone, Copy)]
enum AtCap {
    /// The calls in flight on its session (`429`).
    Session,
    /// The requests in flight without a session (`503`).
    Stateless,
    /// The open sessions, for an `initialize` (`503`).
    Sessions,
}

/// Why a request body was not read to its end.
#[derive(Debug)]
enum BodyRefused {
    /// It came past the limit; reading stopped there.
    TooLarge,
    /// It did not arrive within the body deadline.
    TimedOut,
    /// The transport failed while it was read.
    Broken(String),
}

/// Reads a request body of at most `max` bytes into one buffer, and stops reading as soon as it would pass `max`.
///
/// Each frame is copied out as it comes, so that the transport's read buffers are free again at once: what is held
/// is the body read so far, in a buffer that never grows past `max`, and one read buffer. (Holding the frames, as
/// `http_body_util::Collected` does, keeps alive every read buffer they were cut from, however little of it they
/// use, so the bytes held would depend on how the network split the body.) A declared length reserves the buffer
/// once; a body that comes in one frame is kept as it is, without a copy.
async fn read_body<B>(body: B, declared: Option<u64>, max: usize) -> Result<Bytes, BodyRefused>
where
    B: HttpBody,
    B::Error: fmt::Display,
{
    use bytes::{Buf, BufMut};

    let mut body = std::pin::pin!(body);
    // The first frame, kept whole while it is the only one.
    let mut first: Option<Bytes> = None;
    let mut buffer: Vec<u8> = Vec::new();
    let mut len = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyRefused::Broken(e.to_string()))?;
        // Trailers carry nothing a JSON-RPC message needs.
        let Ok(mut data) = frame.into_data() else { continue };
        let n = data.remaining();
        if n == 0 {
            continue;
        }
        len = len.checked_add(n).filter(|&len| len <= max).ok_or(BodyRefused::TooLarge)?;
        if len == n {
            first = Some(data.copy_to_bytes(n));
            continue;
        }
        if buffer.capacity() < len {
            // A declared length (within the limit, checked before reading) is reserved once; a body without one,
            // or one that runs past what it declared, grows the buffer by doubling, up to the limit.
            let wanted = match declared.map(|d| d as usize).filter(|&d| d >= len) {
                Some(declared) => declared,
                None => buffer.capacity().saturating_mul(2).max(len).max(16 * 1024).min(max),
            };
            buffer.reserve_exact(wanted - buffer.len());
        }
        if let Some(first) = first.take() {
            buffer.put(first);
        }
        buffer.put(data);
    }
    Ok(first.unwrap_or_else(|| Bytes::from(buffer)))
}

impl McpServer {
    /// keel's Streamable HTTP service for this server (one [`McpSession`] per client session), with the limits of
    /// `config`. Serve it with [`McpHttpService::serve`] or mount it in any HTTP stack.
    pub fn http_service(&self, config: HttpConfig) -> McpHttpService {
        let server = self.clone();
        #[cfg(feature = "auth")]
        let protected = config.auth.is_some();
        #[cfg(not(feature = "auth"))]
        let protected = false;
        let sessions =
            Arc::new(Sessions::new(config.max_sessions, config.idle_timeout, config.sdk.sse_retry, protected));
        let retry_after_s = config.retry_after.as_secs() + u64::from(config.retry_after.subsec_nanos() > 0);
        let max_body_bytes = config.max_body_bytes.unwrap_or_else(|| self.executor().limits().max_bytes);
        let limits = Limits {
            retry_after: HeaderValue::from(retry_after_s),
            retry_after_s,
            max_body_bytes,
            max_calls_per_session: config.max_calls_per_session,
            stateless: Arc::new(Semaphore::new(config.max_stateless_requests)),
            max_stateless_requests: config.max_stateless_requests,
            header_read_timeout: config.header_read_timeout,
            body_read_timeout: config.body_read_timeout,
            max_header_bytes: config.max_header_bytes,
            max_connections: config.max_connections,
            max_connections_per_client: config.max_connections_per_client,
            health_details: config.health_details,
        };
        let sdk = config.sdk.with_max_request_body_bytes(max_body_bytes);
        McpHttpService {
            inner: StreamableHttpService::new(move || Ok(server.session()), sessions.clone(), sdk),
            sessions,
            limits: Arc::new(limits),
            health: config.health,
            #[cfg(feature = "auth")]
            metadata: config
                .auth
                .as_ref()
                .map(|a| Arc::new((a.metadata_path(), Bytes::from(a.metadata().to_string())))),
            #[cfg(feature = "auth")]
            auth: config.auth.map(Arc::new),
            rates: Limiters::new(&config.rate_limits).map(Arc::new),
            allowed_pairs: Arc::default(),
            server: self.clone(),
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

    /// The largest request body read; see [`HttpConfig::max_body_bytes`].
    pub fn max_body_bytes(&self) -> usize {
        self.limits.max_body_bytes
    }

    /// Answers one HTTP request (on whatever path it came).
    ///
    /// The checks run in one fixed order, each cheaper than the next, and each refuses before the next runs
    /// (the guide's security chapter, `docs/guide/src/security.md`, "MCP over HTTP: the order of the checks"):
    /// 1. `Host` and `Origin`, as the SDK checks them: `403` (`400` for a `Host` that is not
    ///    one), before anything else is looked at or counted;
    /// 2. the session header's form: `400` when it is not text;
    /// 3. the bearer token and, for a request of a session, the session's owner (on a protected server): `401` or
    ///    `403`;
    /// 4. the declared body length (`413`), then the slot the request is served under: its session's call slot, or
    ///    a stateless one for every request the SDK may serve without a session (`429`, `503`), taken before the
    ///    body is read so that a body slow to come holds it;
    /// 5. the body, read within the body limit (`413`) and the body deadline (`408`, and the connection closes);
    /// 6. the rate limits, the client's then the tool's (`429`), and a tool's scopes (`403`), which need the body;
    ///    a request refused here gives its slot back at once;
    /// 7. the SDK.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<ResponseBody>
    where
        B: HttpBody + Send + 'static,
        B::Data: Send + 'static,
        B::Error: fmt::Display + std::error::Error + Send + Sync + 'static,
    {
        if let Some(refusal) = self.check_host_and_origin(request.uri(), request.headers()).await {
            return refusal;
        }
        self.handle_checked(request).await
    }

    /// [`McpHttpService::handle`] from its second check on: `Host` and `Origin` have been checked.
    async fn handle_checked<B>(&self, request: Request<B>) -> Response<ResponseBody>
    where
        B: HttpBody + Send + 'static,
        B::Data: Send + 'static,
        B::Error: fmt::Display + std::error::Error + Send + Sync + 'static,
    {
        if request.headers().get(&SESSION_HEADER).is_some_and(|id| id.to_str().is_err()) {
            return bad_session_header();
        }
        #[cfg(feature = "auth")]
        let request = match self.authenticate(request).await {
            Ok(admitted) => admitted,
            Err(refusal) => return refusal,
        };
        self.handle_admitted(request).await
    }

    /// Checks a request's `Host` and `Origin` exactly as the SDK does, and nothing else of it: `None` when both are
    /// allowed, else the SDK's own refusal. The SDK is asked with a request of those two headers only, no body, and
    /// a method it serves on no path, which it answers `405` once they have passed.
    async fn check_host_and_origin(
        &self,
        uri: &hyper::Uri,
        headers: &hyper::HeaderMap,
    ) -> Option<Response<ResponseBody>> {
        let (host, origin) = (headers.get(hyper::header::HOST), headers.get(hyper::header::ORIGIN));
        if let Some(host) = host
            && self.allowed_pairs.contains(host, origin)
        {
            return None;
        }
        let mut probe = Request::new(http_body_util::Empty::<Bytes>::new());
        *probe.method_mut() = Method::from_bytes(b"KEEL-PROBE").expect("a valid method name");
        *probe.uri_mut() = uri.clone();
        for name in [hyper::header::HOST, hyper::header::ORIGIN] {
            if let Some(value) = headers.get(&name) {
                probe.headers_mut().insert(name, value.clone());
            }
        }
        let answer = self.inner.handle(probe).await;
        if answer.status() != StatusCode::METHOD_NOT_ALLOWED {
            return Some(answer);
        }
        // Without `Host` the SDK reads the URI's authority: such a request is asked about each time.
        if let Some(host) = host {
            self.allowed_pairs.insert(host, origin);
        }
        None
    }

    /// Checks the request's bearer token (on a protected server) and, when it names a session, that the session is
    /// its principal's: the request with its [`auth::Principal`] in its extensions, or the refusal.
    #[cfg(feature = "auth")]
    async fn authenticate<B>(&self, mut request: Request<B>) -> Result<Request<B>, Response<ResponseBody>> {
        let Some(resource) = &self.auth else { return Ok(request) };
        let authorization = request.headers().get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        // The client's address, so that a verifier can bound what one client makes it do (introspection).
        let client = request.extensions().get::<std::net::SocketAddr>().map(std::net::SocketAddr::ip);
        let principal = match resource.authenticate_from(client, authorization).await {
            Ok(p) => p,
            Err((status, challenge)) => {
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::UNAUTHORIZED);
                let text = if status == StatusCode::FORBIDDEN {
                    "Forbidden: the token lacks a scope this server requires\n"
                } else {
                    "Unauthorized: a valid bearer token is required\n"
                };
                let mut response = text_response(status, text.to_owned());
                if let Ok(value) = HeaderValue::from_str(&challenge) {
                    response.headers_mut().insert(hyper::header::WWW_AUTHENTICATE, value);
                }
                return Err(response);
            }
        };
        // The session header is text (checked before); every session of a protected server has an owner.
        if let Some(id) = request.headers().get(&SESSION_HEADER).and_then(|v| v.to_str().ok())
            && self.sessions.owned_by(id, &principal.subject) == Some(false)
        {
            return Err(text_response(
                StatusCode::FORBIDDEN,
                "Forbidden: this session belongs to another principal\n".to_owned(),
            ));
        }
        request.extensions_mut().insert(principal);
        Ok(request)
    }
    /// On a protected server, a `tools/call` of a tool whose scopes the caller's token lacks: `403` with
    /// `error="insufficient_scope"` and the scopes to ask for (the token's and the tool's), before anything runs.
    #[cfg(feature = "auth")]
    fn step_up(
        &self,
        parts: &hyper::http::request::Parts,
        message: Option<&rate::Message<'_>>,
    ) -> Option<Response<ResponseBody>> {
        let resource = self.auth.as_ref()?;
        let principal = parts.extensions.get::<Arc<auth::Principal>>()?;
        if !self.server.executor().view().has_scoped_tools() {
            return None;
        }
        let name = match StandardHeaders::of(parts) {
            Some(headers) => headers.tool()?,
            None => message?.tool()?,
        };
        let executor = self.server.executor();
        let def = executor.view().get(name)?;
        // A tool outside the principal's view is refused as an unknown one, by the server: never named here.
        if !self.server.visible_to(principal, name) || def.allowed_with(&principal.scopes) {
            return None;
        }
        let missing: Vec<&str> = def.scopes().filter(|s| !principal.has_scope(s)).collect();
        let mut wanted: Vec<&str> = principal.scopes.iter().map(String::as_str).collect();
        wanted.extend(missing.iter().copied());
        let description = format!("calling `{name}` needs the scope {}", missing.join(" "));
        let challenge = resource.challenge(Some(("insufficient_scope", &description)), Some(&wanted.join(" ")));
        let mut response = text_response(StatusCode::FORBIDDEN, format!("Forbidden: {description}\n"));
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response.headers_mut().insert(hyper::header::WWW_AUTHENTICATE, value);
        }
        Some(response)
    }

    /// The protected resource metadata's path and document, on a protected server.
    #[cfg(feature = "auth")]
    pub fn protected_resource_metadata(&self) -> Option<(String, serde_json::Value)> {
        self.auth.as_ref().map(|a| (a.metadata_path(), a.metadata()))
    }

    async fn handle_admitted<B>(&self, request: Request<B>) -> Response<ResponseBody>
    where
        B: HttpBody + Send + 'static,
        B::Data: Send + 'static,
        B::Error: fmt::Display + std::error::Error + Send + Sync + 'static,
    {
        if request.method() != Method::POST {
            return self.handle_inner(request).await;
        }
        let max_body = self.limits.max_body_bytes;
        let declared = content_length(&request);
        if declared.is_some_and(|n| n > max_body as u64) {
            return too_large(max_body);
        }
        let (parts, body) = request.into_parts();
        // The slot the request is served under, taken before its body is read: a body that is slow to come holds
        // it, so slow bodies are held to the caps of the requests they would be.
        let slot = match self.slot_before_body(&parts.headers) {
            Ok(slot) => slot,
            Err(cap) => return self.at_cap(cap),
        };
        // The body is read here, within the limit and the deadline, so that what it is decides what remains to be
        // decided of its slot; the SDK then parses it from memory.
        let body = match read_body_within(body, declared, max_body, self.limits.body_read_timeout).await {
            Ok(body) => body,
            Err(BodyRefused::TooLarge) => return too_large(max_body),
            Err(BodyRefused::TimedOut) => return body_timed_out(self.limits.body_read_timeout),
            Err(BodyRefused::Broken(e)) => {
                return text_response(StatusCode::BAD_REQUEST, format!("Bad Request: {e}\n"));
            }
        };
        let slot = match self.slot_after_body(slot, &parts.headers, &body) {
            Ok(slot) => slot,
            Err(cap) => return self.at_cap(cap),
        };
        // The client's own rate limit, then the tool's scopes, then the tool's rate limit: each refuses before
        // anything of the request is done, and a refusal takes nothing from the checks after it.
        // The body is read once for both, and only when one of them needs it: the scopes' check, only when a
        // tool needs a scope, and then it takes the tool from the standard headers when the request has them
        // (rmcp refuses a request whose headers and body differ, and the executor checks the scopes again in any
        // case).
        #[cfg(feature = "auth")]
        let reads_body = self.auth.is_some()
            && self.server.executor().view().has_scoped_tools()
            && StandardHeaders::of(&parts).is_none();
        #[cfg(not(feature = "auth"))]
        let reads_body = false;
        let message = if self.rates.is_some() || reads_body { rate::Message::of(&body) } else { None };
        let rated = self.rates.as_ref().map(|rates| (rates, Client::of(&parts), message.as_ref()));
        if let Some((rates, client, message)) = &rated
            && message.is_none_or(|m| m.method.is_some() && m.id.is_some())
            && let Err(refusal) = rates.check_principal(client)
        {
            return self.rate_limited(refusal, *message, None);
        }
        #[cfg(feature = "auth")]
        if let Some(refusal) = self.step_up(&parts, message.as_ref()) {
            return refusal;
        }
        if let Some((rates, client, Some(message))) = &rated
            && message.id.is_some()
            && let Some(tool) = message.tool()
            && rates.limits_tool(tool)
            && self.may_call(&parts, tool)
            && let Err(refusal) = rates.check_tool(tool, client)
        {
            return self.rate_limited(refusal, Some(message), Some(tool));
        }
        drop(rated);
        let response = self.handle_inner(Request::from_parts(parts, Full::new(body))).await;
        match slot {
            Some(slot) => admission::holding(response, slot),
            None => response,
        }
    }

    /// The slot a `POST` is to be served under, as far as its headers tell: its session's call slot when it names
    /// an open session in a revision with sessions, and the SDK serves sessions; else a stateless slot, whatever
    /// session header it carries (the SDK serves a request of 2026-07-28 without a session whatever that header
    /// says, and answers an unknown session at once). A session at its cap is decided once the body is read.
    fn slot_before_body(&self, headers: &hyper::HeaderMap) -> Result<Pending, AtCap> {
        if let Some(in_flight) = self.session_of(headers) {
            return Ok(match in_flight.enter(self.limits.max_calls_per_session) {
                Some(slot) => Pending::Held(RequestSlot::Session(slot)),
                None => Pending::SessionFull,
            });
        }
        self.stateless_slot().map(|permit| Pending::Held(RequestSlot::Stateless(permit)))
    }

    /// The rest of the slot's decision, with the body read: a request that names its revision in `_meta` may be
    /// served without a session whatever its headers say, and takes a stateless slot instead of its session's; at
    /// a session's cap, a new request is refused and an answer or notification (part of what was already admitted)
    /// passes without a slot; and an `initialize` without a session is refused while every session is taken.
    fn slot_after_body(
        &self,
        pending: Pending,
        headers: &hyper::HeaderMap,
        body: &[u8],
    ) -> Result<Option<RequestSlot>, AtCap> {
        match pending {
            Pending::Held(RequestSlot::Session(slot)) => {
                if Peek::may_name_its_revision(body) && Peek::of(body).names_its_revision() {
                    drop(slot);
                    return self.stateless_slot().map(|permit| Some(RequestSlot::Stateless(permit)));
                }
                Ok(Some(RequestSlot::Session(slot)))
            }
            Pending::SessionFull => {
                let peek = Peek::of(body);
                if peek.names_its_revision() {
                    self.stateless_slot().map(|permit| Some(RequestSlot::Stateless(permit)))
                } else if peek.is_request() {
                    Err(AtCap::Session)
                } else {
                    Ok(None)
                }
            }
            Pending::Held(stateless) => {
                if !headers.contains_key(&SESSION_HEADER)
                    && self.sessions.full()
                    && Peek::of(body).method.as_deref() == Some("initialize")
                {
                    // Refused here, with no session made and nothing logged as an error.
                    return Err(AtCap::Sessions);
                }
                Ok(Some(stateless))
            }
        }
    }

    /// The in-flight count of the open session a request names, when the SDK serves it in that session as far as
    /// its headers tell: sessions are on, and its `MCP-Protocol-Version` is absent or names a revision with
    /// sessions (before 2026-07-28).
    fn session_of(&self, headers: &hyper::HeaderMap) -> Option<Arc<InFlight>> {
        if !self.inner.config.legacy_session_mode {
            return None;
        }
        let id = headers.get(&SESSION_HEADER)?.to_str().ok()?;
        let with_sessions = match headers.get(&PROTOCOL_HEADER) {
            None => true,
            Some(version) => version.to_str().is_ok_and(|v| v < rmcp::model::ProtocolVersion::NO_INITIALIZE.as_str()),
        };
        if with_sessions { self.sessions.in_flight(id) } else { None }
    }

    /// A stateless slot, or the refusal.
    fn stateless_slot(&self) -> Result<OwnedSemaphorePermit, AtCap> {
        self.limits.stateless.clone().try_acquire_owned().map_err(|_| AtCap::Stateless)
    }

    /// The refusal of a cap.
    fn at_cap(&self, cap: AtCap) -> Response<ResponseBody> {
        match cap {
            AtCap::Session => self.session_busy(),
            AtCap::Stateless => self.stateless_busy(),
            AtCap::Sessions => self.refused(),
        }
    }

    async fn handle_inner<B>(&self, request: Request<B>) -> Response<ResponseBody>
    where
        B: HttpBody + Send + 'static,
        B::Data: Send + 'static,
        B::Error: fmt::Display,
    {
        let scope = Scope {
            refused: Cell::new(false),
            #[cfg(feature = "auth")]
            principal: request.extensions().get::<Arc<auth::Principal>>().cloned(),
        };
        let (response, refused) = SCOPE
            .scope(scope, async {
                let response = self.inner.handle(request).await;
                (response, SCOPE.with(|scope| scope.refused.get()))
            })
            .await;
        // Another `initialize` took the last slot between the check above and this one's.
        if refused { self.refused() } else { response }
    }
    /// A refusal of a cap: `status`, the text, and `Retry-After`.
    fn busy(&self, status: StatusCode, text: String) -> Response<ResponseBody> {
        let mut response = text_response(status, text);
        response.headers_mut().insert(RETRY_AFTER, self.limits.retry_after.clone());
        response
    }

    /// Whether the caller of the request may call `tool`: the server has it and, on a protected server, the
    /// principal's view holds it (its scopes were checked before).
    fn may_call(&self, _parts: &hyper::http::request::Parts, tool: &str) -> bool {
        #[cfg(feature = "auth")]
        if let Some(principal) = _parts.extensions.get::<Arc<auth::Principal>>() {
            return self.server.visible_to(principal, tool);
        }
        self.server.executor().view().contains(tool)
    }

    /// The refusal of a rate limit: `429` with the time until the client's bucket has a request again, or `503`
    /// when the limit tracks as many clients as it may; a JSON-RPC error with the request's id either way.
    fn rate_limited(
        &self,
        refusal: Refusal,
        message: Option<&rate::Message<'_>>,
        tool: Option<&str>,
    ) -> Response<ResponseBody> {
        let (status, retry_after_s, text) = match refusal {
            Refusal::Wait(wait) => {
                let s = rate::retry_after_secs(wait);
                let text = match tool {
                    Some(tool) => format!("rate limit exceeded for calls of `{tool}`; retry in {s} s"),
                    None => format!("rate limit exceeded; retry in {s} s"),
                };
                (StatusCode::TOO_MANY_REQUESTS, s, text)
            }
            Refusal::Full => (
                StatusCode::SERVICE_UNAVAILABLE,
                self.limits.retry_after_s,
                format!(
                    "the server is rate limiting as many clients as it may; retry in {} s",
                    self.limits.retry_after_s
                ),
            ),
        };
        let mut data = serde_json::json!({"code": "rate_limited", "retry_after_s": retry_after_s});
        if let Some(tool) = tool {
            data["tool"] = serde_json::Value::from(tool);
        }
        let id = message.and_then(|m| m.id.clone()).unwrap_or(serde_json::Value::Null);
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": RATE_LIMITED, "message": text, "data": data},
        });
        let mut response = response(status, "application/json", body.to_string());
        response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(retry_after_s));
        response
    }

    fn refused(&self) -> Response<ResponseBody> {
        self.busy(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "Service Unavailable: the server has reached its limit of {} open sessions; retry later\n",
                self.sessions.max
            ),
        )
    }

    fn session_busy(&self) -> Response<ResponseBody> {
        self.busy(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "Too Many Requests: this session has {} requests in flight; retry later\n",
                self.limits.max_calls_per_session
            ),
        )
    }

    fn stateless_busy(&self) -> Response<ResponseBody> {
        self.busy(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "Service Unavailable: the server has {} requests without a session in flight; retry later\n",
                self.limits.max_stateless_requests
            ),
        )
    }

    /// Serves this service at `path` (e.g. `/mcp`) on `listener` until `shutdown` is cancelled; other paths answer
    /// 404.
    ///
    /// Each connection runs on its own task (HTTP/1.1, keep-alive) with `TCP_NODELAY` set, under the connection
    /// caps and the header timeout of the [`HttpConfig`]. On shutdown the listener closes, sessions and their SSE
    /// streams end, and open connections get a few seconds to finish.
    pub async fn serve(&self, listener: TcpListener, path: &str, shutdown: CancellationToken) -> std::io::Result<()> {
        let mut service = self.clone();
        service.inner.config.cancellation_token = shutdown.child_token();
        // Shared by every connection and request: cloning the service itself would copy the SDK's configuration.
        let service = Arc::new(service);
        let path: Arc<str> = Arc::from(path);
        let limits = &self.limits;
        let connections = Connections::new(limits.max_connections, limits.max_connections_per_client);
        let lingering = Lingering::new();
        let mut http1 = hyper::server::conn::http1::Builder::new();
        http1.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
        http1.max_header_size(limits.max_header_bytes);
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
            let slot = match connections.admit(peer.ip()) {
                Ok(slot) => slot,
                Err(refusal) => {
                    tracing::debug!(%peer, ?refusal, "MCP HTTP connection refused");
                    lingering.refuse(stream, refusal, limits.retry_after_s);
                    continue;
                }
            };
            configure(&stream);
            let service = service.clone();
            let path = path.clone();
            let shutdown = shutdown.clone();
            let http1 = http1.clone();
            tokio::spawn(async move {
                let _slot = slot;
                let handler = hyper::service::service_fn(move |mut req: Request<Incoming>| {
                    // The client's address, for the rate limits of a server that is not protected.
                    req.extensions_mut().insert(peer);
                    let service = service.clone();
                    let on_path = req.uri().path() == &*path;
                    let health = match &service.health {
                        Some(h) if req.uri().path() == &*h.path && req.method() == Method::GET => {
                            Some(h.report.clone())
                        }
                        _ => None,
                    };
                    #[cfg(feature = "auth")]
                    let metadata = match &service.metadata {
                        Some(m) if req.uri().path() == m.0 && req.method() == Method::GET => Some(m.1.clone()),
                        _ => None,
                    };
                    async move {
                        // `Host` and `Origin` first, for every route (the order of the checks: `handle`).
                        if let Some(refusal) = service.check_host_and_origin(req.uri(), req.headers()).await {
                            return Ok::<_, Infallible>(refusal);
                        }
                        #[cfg(feature = "auth")]
                        if let Some(document) = metadata {
                            let mut answer = Response::new(Full::new(document).boxed());
                            answer.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                            return Ok::<_, Infallible>(answer);
                        }
                        if let Some(report) = health {
                            return Ok::<_, Infallible>(health_response(&report(), service.limits.health_details));
                        }
                        if on_path { Ok(service.handle_checked(req).await) } else { Ok(not_found()) }
                    }
                });
                let conn = http1.serve_connection(TokioIo::new(stream), handler);
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

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    /// A body that hands out the given pieces one frame each, then `error` if there is one.
    struct Pieces {
        pieces: VecDeque<Bytes>,
        error: Option<&'static str>,
    }

    impl HttpBody for Pieces {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
            Poll::Ready(match self.pieces.pop_front() {
                Some(piece) => Some(Ok(hyper::body::Frame::data(piece))),
                None => self.error.take().map(|e| Err(std::io::Error::other(e))),
            })
        }
    }

    fn pieces(sizes: &[usize]) -> (Pieces, Vec<u8>) {
        let mut all = Vec::new();
        let pieces = sizes
            .iter()
            .map(|&n| {
                let piece: Vec<u8> = (0..n).map(|i| (all.len() + i) as u8).collect();
                all.extend_from_slice(&piece);
                Bytes::from(piece)
            })
            .collect();
        (Pieces { pieces, error: None }, all)
    }

    fn read(body: Pieces, declared: Option<u64>, max: usize) -> Result<Bytes, BodyRefused> {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(read_body(body, declared, max))
    }

    #[test]
    fn a_body_is_read_whole_in_order_however_it_is_split() {
        for sizes in
            [&[][..], &[0], &[10], &[0, 10, 0], &[1, 1, 1], &[3, 40_000, 5, 70_000], &[16 * 1024, 16 * 1024, 1]]
        {
            let total: usize = sizes.iter().sum();
            for declared in [None, Some(total as u64)] {
                let (body, all) = pieces(sizes);
                let read = read(body, declared, 1 << 20).unwrap();
                assert_eq!(&read[..], &all[..], "{sizes:?}, declared {declared:?}");
            }
        }
    }

    #[test]
    fn a_body_longer_than_it_declared_is_read_whole_within_the_limit() {
        let (body, all) = pieces(&[10, 10, 10]);
        assert_eq!(&read(body, Some(10), 1000).unwrap()[..], &all[..]);
        let (body, _) = pieces(&[600, 600]);
        assert!(matches!(read(body, Some(600), 1000), Err(BodyRefused::TooLarge)));
    }

    #[test]
    fn a_body_of_one_frame_is_kept_without_a_copy() {
        let (body, _) = pieces(&[0, 1000, 0]);
        let frame = body.pieces[1].clone();
        let read = read(body, None, 1 << 20).unwrap();
        assert_eq!(read.as_ptr(), frame.as_ptr());
    }

    #[test]
    fn a_body_past_the_limit_is_refused_at_the_frame_that_passes_it() {
        // Exactly the limit is read; one byte past it is refused, with or without a declared length.
        let (body, all) = pieces(&[600, 400]);
        assert_eq!(&read(body, None, 1000).unwrap()[..], &all[..]);
        let (body, _) = pieces(&[600, 401]);
        assert!(matches!(read(body, None, 1000), Err(BodyRefused::TooLarge)));
        let (mut body, _) = pieces(&[1001]);
        // Reading stops there: what comes after the frame that passed the limit is not asked for.
        body.error = Some("never read");
        assert!(matches!(read(body, Some(1000), 1000), Err(BodyRefused::TooLarge)));
    }

    #[test]
    fn a_transport_error_while_reading_is_said() {
        let (mut body, _) = pieces(&[10, 10]);
        body.error = Some("connection reset");
        match read(body, None, 1000) {
            Err(BodyRefused::Broken(e)) => assert_eq!(e, "connection reset"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_buffer_never_grows_past_the_limit() {
        // Growing by doubling from 16 KiB would pass 100,000 on its way; the buffer stops at the limit.
        let max = 100_000;
        let (body, _) = pieces(&[20_000, 20_000, 20_000, 20_000, 20_000]);
        let read = read(body, None, max).unwrap();
        assert_eq!(read.len(), max);
        let Ok(buffer) = read.try_into_mut() else { panic!("the buffer is not shared") };
        assert!(buffer.capacity() <= max, "{}", buffer.capacity());
    }

    #[test]
    fn an_allowed_origin_without_a_port_means_the_default_port() {
        for (given, meant) in [
            ("https://app.example.com", "https://app.example.com:443"),
            ("http://app.example.com", "http://app.example.com:80"),
            ("https://app.example.com:8443", "https://app.example.com:8443"),
            ("http://localhost:*", "http://localhost:*"),
            ("http://[::1]", "http://[::1]:80"),
            ("http://[::1]:*", "http://[::1]:*"),
            ("null", "null"),
            ("ftp://files.example", "ftp://files.example"),
        ] {
            assert_eq!(with_default_port(given.to_owned()), meant, "{given}");
        }
    }
}
