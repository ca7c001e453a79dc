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
use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Body as HttpBody;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use rmcp::transport::StreamableHttpService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::server::{McpServer, McpSession};

// The layers of a request, in the order it meets them: the connection (`serve`: the accept loop, its caps and the
// header timeout), the checks before the body (`checks`: `Host` and `Origin`, then the bearer token), the slot it is
// served under (`slots`, over `admission`'s counts), its body (`body`), the checks that read the body (`checks`: the
// rate limits and a tool's scopes, over `rate` and `envelope`), then the SDK over the session manager (`sessions`).
// The configuration is `config`; the service's own answers are `responses`.
mod admission;
#[cfg(feature = "auth")]
pub mod auth;
mod body;
mod checks;
mod config;
mod envelope;
mod rate;
mod responses;
mod serve;
mod sessions;
mod slots;

use body::{BodyRefused, content_length, read_body_within};
use checks::AllowedPairs;
use config::HealthRoute;
pub use config::{
    DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_CALLS_PER_SESSION, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_CLIENT, DEFAULT_MAX_HEADER_BYTES, DEFAULT_MAX_SESSIONS, DEFAULT_MAX_STATELESS_REQUESTS,
    DEFAULT_RETRY_AFTER, DEFAULT_SESSION_IDLE_TIMEOUT, HealthReport, HttpConfig, LOOPBACK_ORIGINS,
};
use envelope::Envelope;
#[cfg(feature = "auth")]
use envelope::StandardHeaders;
use rate::{Client, Limiters};
pub use rate::{DEFAULT_MAX_RATE_LIMITED_CLIENTS, Quota, RATE_LIMITED, RateLimits};
use responses::{bad_session_header, body_timed_out, text_response, too_large};
use sessions::{SCOPE, Scope, Sessions};

/// The session header of the Streamable HTTP transport (a `HeaderName`, so that a lookup does not parse the name
/// on every request).
const SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");
/// The protocol revision header.
const PROTOCOL_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
#[cfg(feature = "auth")]
const METHOD_HEADER: HeaderName = HeaderName::from_static("mcp-method");
#[cfg(feature = "auth")]
const NAME_HEADER: HeaderName = HeaderName::from_static("mcp-name");

/// The response body type of the HTTP service.
pub type ResponseBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

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
        let envelope = Envelope::new(&body);
        let slot = match self.slot_after_body(slot, &parts.headers, &envelope) {
            Ok(slot) => slot,
            Err(cap) => return self.at_cap(cap),
        };
        // The client's own rate limit, then the tool's scopes, then the tool's rate limit: each refuses before
        // anything of the request is done, and a refusal takes nothing from the checks after it.
        // The body is parsed at most once for the slot and these checks, and only when one of them needs it: the
        // scopes' check, only when a tool needs a scope, and then it takes the tool from the standard headers when
        // the request has them (rmcp refuses a request whose headers and body differ, and the executor checks the
        // scopes again in any case).
        #[cfg(feature = "auth")]
        let reads_body = self.auth.is_some()
            && self.server.executor().view().has_scoped_tools()
            && StandardHeaders::of(&parts).is_none();
        #[cfg(not(feature = "auth"))]
        let reads_body = false;
        let message = if self.rates.is_some() || reads_body { envelope.message() } else { None };
        let rated = self.rates.as_ref().map(|rates| (rates, Client::of(&parts), message));
        if let Some((rates, client, message)) = &rated
            && message.is_none_or(|m| m.method.is_some() && m.id.is_some())
            && let Err(refusal) = rates.check_principal(client)
        {
            return self.rate_limited(refusal, *message, None);
        }
        #[cfg(feature = "auth")]
        if let Some(refusal) = self.step_up(&parts, message) {
            return refusal;
        }
        if let Some((rates, client, Some(message))) = &rated
            && message.id.is_some()
            && let Some(tool) = message.tool()
            && rates.limits_tool(tool)
            && self.may_call(&parts, tool)
            && let Err(refusal) = rates.check_tool(tool, client)
        {
            return self.rate_limited(refusal, Some(*message), Some(tool));
        }
        drop(rated);
        drop(envelope);
        let response = self.handle_inner(Request::from_parts(parts, Full::new(body))).await;
        match slot {
            Some(slot) => admission::holding(response, slot),
            None => response,
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
mod tests;
