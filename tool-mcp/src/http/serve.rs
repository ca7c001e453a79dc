//! Serving the service on a listener: the accept loop, the connection caps and the header timeout.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "auth")]
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
#[cfg(feature = "auth")]
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::admission::{Connections, Lingering};
use super::responses::{health_response, not_found};
use super::{McpHttpService, ResponseBody};

/// How long open connections get to finish after shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

impl McpHttpService {
    /// Serves this service at `path` (e.g. `/mcp`) on `listener` until `shutdown` is cancelled; other paths answer
    /// 404.
    ///
    /// Each connection runs on its own task (HTTP/1.1, keep-alive) with `TCP_NODELAY` set, under the connection caps
    /// and the header timeout of the [`HttpConfig`](super::HttpConfig). On shutdown the listener closes, sessions and
    /// their SSE streams end, and open connections get a few seconds to finish.
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
                    let (service, path) = (service.clone(), path.clone());
                    async move { Ok::<_, Infallible>(service.route(req, &path).await) }
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

    /// One request on a connection of [`McpHttpService::serve`]: `Host` and `Origin` first, for every route (the
    /// order of the checks: [`McpHttpService::handle`]); then the protected resource metadata, the health route and
    /// the MCP path; any other path is not found.
    async fn route(&self, request: Request<Incoming>, path: &str) -> Response<ResponseBody> {
        if let Some(refusal) = self.check_host_and_origin(request.uri(), request.headers()).await {
            return refusal;
        }
        let get = request.method() == Method::GET;
        #[cfg(feature = "auth")]
        if let Some(metadata) = &self.metadata
            && get
            && request.uri().path() == metadata.0
        {
            let mut answer = Response::new(Full::new(metadata.1.clone()).boxed());
            answer.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            return answer;
        }
        if let Some(health) = &self.health
            && get
            && request.uri().path() == &*health.path
        {
            return health_response(&(health.report)(), self.limits.health_details);
        }
        if request.uri().path() == path { self.handle_checked(request).await } else { not_found() }
    }
}

/// Socket options of an accepted connection: `TCP_NODELAY`, so that every write leaves at once.
fn configure(stream: &TcpStream) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "TCP_NODELAY could not be set on an MCP HTTP connection");
    }
}
