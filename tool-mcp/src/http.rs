//! Streamable HTTP serving (feature `http`).
//!
//! [`McpServer::serve_http`] answers MCP on one path (e.g. `/mcp`) of an already bound listener, with rmcp's
//! Streamable HTTP transport: sessions (`Mcp-Session-Id`), SSE streams for notifications and server requests,
//! and the SDK's DNS-rebinding protection (only `localhost`, `127.0.0.1` and `::1` are accepted as `Host` by
//! default; see [`McpServer::http_service`] to change the configuration). Other paths answer 404.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::server::{McpServer, McpSession};

/// How long open connections get to finish after shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn not_found() -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(b"not found\n")).boxed());
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}

impl McpServer {
    /// rmcp's Streamable HTTP service for this server (one [`McpSession`] per client session), to mount in any
    /// HTTP stack. `config` comes from [`StreamableHttpServerConfig::default`] and its builder methods.
    pub fn http_service(
        &self,
        config: StreamableHttpServerConfig,
    ) -> StreamableHttpService<McpSession, LocalSessionManager> {
        let server = self.clone();
        StreamableHttpService::new(move || Ok(server.session()), Arc::new(LocalSessionManager::default()), config)
    }

    /// Serves MCP over Streamable HTTP at `path` (e.g. `/mcp`) on `listener` until `shutdown` is cancelled.
    ///
    /// Each connection runs on its own task (HTTP/1.1). On shutdown the listener closes, sessions and their SSE
    /// streams end, and open connections get a few seconds to finish.
    pub async fn serve_http(
        &self,
        listener: TcpListener,
        path: &str,
        shutdown: CancellationToken,
    ) -> std::io::Result<()> {
        let config = StreamableHttpServerConfig::default().with_cancellation_token(shutdown.child_token());
        let service = self.http_service(config);
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
            let service = service.clone();
            let path = path.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                let handler = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let service = service.clone();
                    let on_path = req.uri().path() == &*path;
                    async move { if on_path { Ok::<_, Infallible>(service.handle(req).await) } else { Ok(not_found()) } }
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
