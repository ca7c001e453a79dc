//! [`HttpConfig`]: what the Streamable HTTP server accepts, its limits and their defaults, and the SDK's own
//! settings.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::StreamableHttpServerConfig;
use tokio::sync::Semaphore;

use super::RateLimits;
#[cfg(feature = "auth")]
use super::auth;

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
    pub(super) sdk: StreamableHttpServerConfig,
    pub(super) max_sessions: usize,
    pub(super) idle_timeout: Option<Duration>,
    pub(super) retry_after: Duration,
    pub(super) health: Option<HealthRoute>,
    pub(super) health_details: bool,
    pub(super) header_read_timeout: Option<Duration>,
    pub(super) body_read_timeout: Option<Duration>,
    pub(super) max_header_bytes: usize,
    pub(super) max_connections: usize,
    pub(super) max_connections_per_client: usize,
    pub(super) max_calls_per_session: usize,
    pub(super) max_stateless_requests: usize,
    pub(super) max_body_bytes: Option<usize>,
    pub(super) rate_limits: RateLimits,
    #[cfg(feature = "auth")]
    pub(super) auth: Option<auth::ResourceServer>,
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

pub(super) type HealthFn = dyn Fn() -> HealthReport + Send + Sync;

/// A `GET` route that reports the server's health; see [`HttpConfig::health`].
#[derive(Clone)]
pub(super) struct HealthRoute {
    pub(super) path: Arc<str>,
    pub(super) report: Arc<HealthFn>,
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

    /// Answers `GET path` (e.g. `/health`) with `report()`: `200 OK` and `{"status": "ok"}` when it says healthy, else
    /// `503 Service Unavailable` and `{"status": "degraded"}`, so that a load balancer or an orchestrator can read it.
    /// The report's own body is sent only with [`HttpConfig::health_details`]. Served by
    /// [`McpHttpService::serve`](super::McpHttpService::serve) beside the MCP path; `report` runs on each request and
    /// should be cheap.
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
    /// cancellation token is replaced by [`McpHttpService::serve`](super::McpHttpService::serve)'s shutdown token, and
    /// its `max_request_body_bytes` by [`HttpConfig::max_body_bytes`].
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
pub(super) fn with_default_port(origin: String) -> String {
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
