//! MCP over Streamable HTTP, end to end: keel's server (`keel_tools_mcp::McpServer::serve_http`) against a bare rmcp
//! server with the same tool (`test_simple_text`, one fixed text) and the same transport settings, in one sitting.
//!
//! ```sh
//! cargo run --release -p keel-bench --features examples --example mcp_http -- \
//!     [SECONDS_PER_ROUND] [ROUNDS]   # defaults: 3 3
//! ```
//!
//! How:
//! - Each server runs in a child process (this example run again with a hidden `serve keel|rmcp ADDR` subcommand),
//!   so the load generator and the server do not share a runtime. The child binds `127.0.0.1:0`, prints its address
//!   on stdout and serves until its stdin closes; the parent kills it at the end. Both children use a multi-thread
//!   Tokio runtime with the default worker count.
//! - Both servers use the same accept loop: one task per connection, `TCP_NODELAY` on every accepted socket, hyper
//!   HTTP/1.1 (`serve_connection` with a `service_fn`). keel's is its own `serve_http`; the rmcp one below is a copy
//!   of it around rmcp's `StreamableHttpService` with `LocalSessionManager::default()` and the default
//!   `StreamableHttpServerConfig`. The rmcp server builds its `ToolRouter` once and shares it (its service factory
//!   runs per session, and per request in the stateless era).
//! - The load generator (this process, multi-thread Tokio runtime) uses raw hyper HTTP/1.1 client connections with
//!   `TCP_NODELAY`, keep-alive, one request in flight per connection. Each call is one POST whose whole body (SSE
//!   or JSON) is read and checked for the tool's text; anything else counts as a failure.
//! - Scenarios: the 2025-11-25 session era (`initialize`, `notifications/initialized`, then `tools/call` with
//!   `Mcp-Session-Id`) over 1 connection, over one session shared by 50 connections, and over 100 sessions of
//!   2 connections each; the 2026-07-28 stateless era (no session, `_meta` protocol fields and the `Mcp-Method` /
//!   `Mcp-Name` headers) over 1 and over 50 connections.
//! - Each round runs every scenario for both contenders in turn, alternating which goes first. Each measurement
//!   opens fresh connections and sessions, warms up for 0.5 s (not recorded), then records SECONDS_PER_ROUND of
//!   load: calls/s = calls completed in the window / window, p50 and p99 over those calls' latencies. Sessions are
//!   closed with `DELETE` afterwards. The table shows medians over rounds, and the median over rounds of each
//!   round's keel/rmcp ratio. A contender that cannot serve a scenario is shown as `n/a`.
//!
//! With `MCP_HTTP_BASELINE=PATH` (another build of this example, e.g. of an earlier commit), that build's keel
//! server replaces the bare rmcp server: two versions of keel under the same load, in one sitting.
//!
//! With `MCP_HTTP_AUTH=1`, the cost of bearer validation: the contenders are keel's server as an OAuth protected
//! resource (`HttpConfig::auth` with a `ResourceServer` and a `JwtVerifier` over an inline JWKS, so the keys are
//! in memory, as a fetched JWKS is once cached), shown as `keel+auth`, and keel's server without auth, shown as
//! `keel`. The load generator makes an ES256 key at start (rcgen), passes its public JWK to the protected server
//! (environment variable `MCP_HTTP_JWKS` of the child), mints one token with it (jsonwebtoken: issuer, the server's
//! resource URI as audience, `sub`, `scope`, `exp` an hour away) and sends it as `Authorization: Bearer` on every
//! request to both servers, so that the two differ only by what the server does with it: the token checked (its
//! signature and claims on its first request, then found in the verifier's cache of verified tokens by its SHA-256
//! digest), and (session era) the session's owner compared. Not with `MCP_HTTP_BASELINE`.
//!
//! All traffic goes to 127.0.0.1.

use std::convert::Infallible;
use std::io::{BufRead, BufReader, Write as _};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use keel_tools_core::content::Content;
use keel_tools_core::{Executor, Registry, tool};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// The text the tool returns, and what every answer is checked for.
const TEXT: &str = "This is a simple text response for testing.";
/// The tool both servers expose.
const TOOL: &str = "test_simple_text";
/// The MCP endpoint of both servers.
const PATH: &str = "/mcp";
/// The protocol revision with sessions.
const SESSION_REVISION: &str = "2025-11-25";
/// The stateless protocol revision.
const STATELESS_REVISION: &str = "2026-07-28";

/// Load before each recorded window, not recorded.
const WARM_UP: Duration = Duration::from_millis(500);
/// The longest one call may take before it counts as failed (and its connection is given up).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest one setup step (connect, initialize, delete) may take.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a child gets to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a child gets to exit after its stdin closes, before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

const SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");
const PROTOCOL_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
const METHOD_HEADER: HeaderName = HeaderName::from_static("mcp-method");
const NAME_HEADER: HeaderName = HeaderName::from_static("mcp-name");

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0.1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// Returns a simple text response.
#[tool(effect = "read", version = "1.0")]
fn test_simple_text() -> Content {
    Content::text(TEXT)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("serve") {
        serve(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("mint") {
        mint(&args[1..]);
    }
    if let Err(message) = bench(&args) {
        eprintln!("mcp_http: {message}");
        std::process::exit(2);
    }
}

// ---- The servers (child processes) ----

#[derive(Clone, Copy, PartialEq, Eq)]
enum Contender {
    Keel,
    Rmcp,
}

impl Contender {
    fn name(self) -> &'static str {
        match self {
            Contender::Keel if auth_mode() => "keel+auth",
            Contender::Keel => "keel",
            Contender::Rmcp if auth_mode() => "keel",
            Contender::Rmcp if baseline().is_some() => "baseline",
            Contender::Rmcp => "rmcp",
        }
    }
}

/// Another build of this example, named by `MCP_HTTP_BASELINE`: when set, its keel server takes the place of the
/// bare rmcp server, so that two versions of keel are compared in one sitting (build the other version's example
/// with its own `--target-dir` and give the path of its `mcp_http`).
/// Whether the contenders are keel with and without bearer validation (`MCP_HTTP_AUTH` set, not `0`).
fn auth_mode() -> bool {
    static AUTH: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AUTH.get_or_init(|| std::env::var("MCP_HTTP_AUTH").is_ok_and(|v| !v.is_empty() && v != "0"))
}

fn baseline() -> Option<&'static std::path::Path> {
    static BASELINE: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    BASELINE.get_or_init(|| std::env::var_os("MCP_HTTP_BASELINE").map(Into::into)).as_deref()
}

/// The server kinds of the `serve` subcommand.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Keel,
    /// keel as a protected resource, its keys from `MCP_HTTP_JWKS`.
    KeelAuth,
    Rmcp,
}

/// `serve keel|keel-auth|rmcp|rmcp-nagle ADDR`: binds ADDR (loopback only), prints the bound address on stdout,
/// serves until stdin closes. `keel-auth` is keel's server as a protected resource whose tokens are checked against
/// the JWKS in `MCP_HTTP_JWKS`, the resource URI being `http://ADDR/mcp` with the bound address. `rmcp-nagle` is the
/// bare rmcp server without `TCP_NODELAY`, to see the stall by hand (e.g. with `wrk`); it is not part of the table.
fn serve(args: &[String]) -> ! {
    let result = (|| {
        let [kind, addr] = args else { return Err("usage: serve keel|keel-auth|rmcp|rmcp-nagle ADDR".to_owned()) };
        let (kind, nodelay) = match kind.as_str() {
            "keel" => (Kind::Keel, true),
            "keel-auth" => (Kind::KeelAuth, true),
            "rmcp" => (Kind::Rmcp, true),
            "rmcp-nagle" => (Kind::Rmcp, false),
            other => return Err(format!("unknown server {other:?}")),
        };
        let addr: SocketAddr = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
        if !addr.ip().is_loopback() {
            return Err(format!("{addr} is not a loopback address"));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
        runtime.block_on(async {
            let listener = TcpListener::bind(addr).await.map_err(|e| format!("binding {addr}: {e}"))?;
            let local = listener.local_addr().map_err(|e| e.to_string())?;
            let mut stdout = std::io::stdout();
            writeln!(stdout, "{local}").and_then(|()| stdout.flush()).map_err(|e| e.to_string())?;
            let shutdown = CancellationToken::new();
            let on_eof = shutdown.clone();
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
                on_eof.cancel();
            });
            match kind {
                Kind::Keel => serve_keel(listener, shutdown).await,
                Kind::KeelAuth => serve_keel_auth(listener, local, shutdown).await,
                Kind::Rmcp => bare::serve(listener, shutdown, nodelay).await,
            }
        })
    })();
    match result {
        Ok(()) => std::process::exit(0),
        Err(message) => {
            eprintln!("mcp_http serve: {message}");
            std::process::exit(2);
        }
    }
}

/// `mint RESOURCE`: makes an ES256 key and prints two lines, the JWKS holding its public key (for `serve
/// keel-auth`'s `MCP_HTTP_JWKS`) and a token for the audience RESOURCE (`http://ADDR/mcp`), valid for an hour. For
/// drivers other than this example's own, such as `bench/http_instructions.py --auth`.
fn mint(args: &[String]) -> ! {
    let result = (|| {
        let [resource] = args else { return Err("usage: mint RESOURCE".to_owned()) };
        let signer = auth::Signer::generate()?;
        Ok(format!("{}\n{}", signer.jwks(), signer.token(resource)?))
    })();
    match result {
        Ok(lines) => {
            println!("{lines}");
            std::process::exit(0)
        }
        Err(message) => {
            eprintln!("mcp_http mint: {message}");
            std::process::exit(2);
        }
    }
}

fn keel_server() -> Result<keel_tools_mcp::McpServer, String> {
    let registry = Registry::from_inventory().map_err(|e| e.to_string())?;
    let view = registry.view().names([TOOL]).build().map_err(|e| e.to_string())?;
    let executor = Executor::new(view).map_err(|e| e.to_string())?;
    keel_tools_mcp::McpServer::new(executor).map_err(|e| e.to_string())
}

async fn serve_keel(listener: TcpListener, shutdown: CancellationToken) -> Result<(), String> {
    keel_server()?.serve_http(listener, PATH, shutdown).await.map_err(|e| e.to_string())
}

/// keel's server as `serve_http` runs it (the same defaults), plus a `ResourceServer` whose `JwtVerifier` holds the
/// keys of `MCP_HTTP_JWKS`.
async fn serve_keel_auth(listener: TcpListener, local: SocketAddr, shutdown: CancellationToken) -> Result<(), String> {
    use keel_tools_mcp::http::HttpConfig;
    use keel_tools_mcp::http::auth::{JwtVerifier, ResourceServer};
    let jwks = std::env::var("MCP_HTTP_JWKS").map_err(|_| "keel-auth needs MCP_HTTP_JWKS".to_owned())?;
    let resource = resource_uri(local);
    let verifier = JwtVerifier::from_jwks_json(auth::ISSUER, &resource, &jwks).map_err(|e| e.to_string())?;
    let protected = ResourceServer::new(resource, verifier).authorization_server(auth::ISSUER);
    let service = keel_server()?.http_service(HttpConfig::default().auth(protected));
    service.serve(listener, PATH, shutdown).await.map_err(|e| e.to_string())
}

/// The resource URI of the protected server at `addr`: its tokens' audience.
fn resource_uri(addr: SocketAddr) -> String {
    format!("http://{addr}{PATH}")
}

mod auth {
    //! The key and the token of the bearer-validation mode.

    use std::time::{SystemTime, UNIX_EPOCH};

    use jsonwebtoken::jwk::{Jwk, JwkSet};
    use jsonwebtoken::{Algorithm, EncodingKey, Header};

    /// The issuer the tokens name.
    pub const ISSUER: &str = "https://auth.bench.keel";
    const KID: &str = "bench-es256";

    /// An ES256 signing key made now.
    pub struct Signer {
        key: EncodingKey,
        jwk: Jwk,
    }

    impl Signer {
        pub fn generate() -> Result<Signer, String> {
            let pair = rcgen::KeyPair::generate().map_err(|e| format!("making an ES256 key: {e}"))?;
            let key = EncodingKey::from_ec_pem(pair.serialize_pem().as_bytes()).map_err(|e| e.to_string())?;
            let mut jwk = Jwk::from_encoding_key(&key, Algorithm::ES256).map_err(|e| e.to_string())?;
            jwk.common.key_id = Some(KID.to_owned());
            Ok(Signer { key, jwk })
        }

        /// The JWKS holding the public key.
        pub fn jwks(&self) -> String {
            serde_json::to_string(&JwkSet { keys: vec![self.jwk.clone()] }).expect("a JWK set serializes")
        }

        /// A token for `audience`, valid for an hour.
        pub fn token(&self, audience: &str) -> Result<String, String> {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map_err(|e| e.to_string())?.as_secs();
            let claims = serde_json::json!({"iss": ISSUER, "aud": audience, "sub": "bench", "scope": "tools",
                "client_id": "bench", "iat": now, "exp": now + 3600});
            let mut header = Header::new(Algorithm::ES256);
            header.kid = Some(KID.to_owned());
            jsonwebtoken::encode(&header, &claims, &self.key).map_err(|e| e.to_string())
        }
    }
}

mod bare {
    //! A plain rmcp server with the same tool, behind the same accept loop as keel's `serve_http`.

    use super::*;

    use rmcp::handler::server::router::tool::ToolRouter;
    use rmcp::model::{CallToolResult, ContentBlock};
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    use rmcp::{ServerHandler, tool, tool_handler, tool_router};

    /// How long open connections get to finish after shutdown (as in keel's loop).
    const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

    #[derive(Clone)]
    pub struct Server {
        tool_router: Arc<ToolRouter<Server>>,
    }

    #[tool_router]
    impl Server {
        /// Returns a simple text response.
        #[tool]
        fn test_simple_text(&self) -> CallToolResult {
            CallToolResult::success(vec![ContentBlock::text(TEXT)])
        }
    }

    #[tool_handler(router = self.tool_router)]
    impl ServerHandler for Server {}

    type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

    fn not_found() -> Response<Body> {
        let mut response = Response::new(Full::new(Bytes::from_static(b"not found\n")).boxed());
        *response.status_mut() = StatusCode::NOT_FOUND;
        response
    }

    pub async fn serve(listener: TcpListener, shutdown: CancellationToken, nodelay: bool) -> Result<(), String> {
        let router = Arc::new(Server::tool_router());
        let mut config = StreamableHttpServerConfig::default();
        config.cancellation_token = shutdown.child_token();
        let service = StreamableHttpService::new(
            move || Ok(Server { tool_router: router.clone() }),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        loop {
            let (stream, _peer) = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                accepted = listener.accept() => match accepted {
                    Ok(pair) => pair,
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let _ = stream.set_nodelay(nodelay);
            let service = service.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                let handler = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let service = service.clone();
                    let on_path = req.uri().path() == PATH;
                    async move { if on_path { Ok::<_, Infallible>(service.handle(req).await) } else { Ok(not_found()) } }
                });
                let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), handler);
                tokio::pin!(conn);
                tokio::select! {
                    r = conn.as_mut() => { let _ = r; }
                    () = shutdown.cancelled() => {
                        conn.as_mut().graceful_shutdown();
                        let _ = tokio::time::timeout(SHUTDOWN_GRACE, conn.as_mut()).await;
                    }
                }
            });
        }
    }
}

/// A running server child; closes its stdin and kills it when dropped.
struct ServerProcess {
    child: std::process::Child,
    addr: SocketAddr,
}

impl ServerProcess {
    /// Starts `contender`; in the bearer-validation mode, the protected server gets the JWKS `jwks`.
    fn start(contender: Contender, jwks: Option<&str>) -> Result<ServerProcess, String> {
        let this = || std::env::current_exe().map_err(|e| format!("locating this executable: {e}"));
        let (exe, kind) = match (contender, baseline()) {
            (Contender::Keel, _) if auth_mode() => (this()?, "keel-auth"),
            (Contender::Rmcp, _) if auth_mode() => (this()?, "keel"),
            (Contender::Rmcp, Some(other)) => (other.to_owned(), "keel"),
            (Contender::Keel, _) => (this()?, "keel"),
            (Contender::Rmcp, None) => (this()?, "rmcp"),
        };
        let mut command = Command::new(exe);
        if let Some(jwks) = jwks.filter(|_| kind == "keel-auth") {
            command.env("MCP_HTTP_JWKS", jwks);
        }
        let mut child = command
            .args(["serve", kind, "127.0.0.1:0"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting the {} server: {e}", contender.name()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = tx.send(BufReader::new(stdout).read_line(&mut line).map(|_| line));
        });
        let mut process = ServerProcess { child, addr: SocketAddr::from(([127, 0, 0, 1], 0)) };
        let line = match rx.recv_timeout(START_TIMEOUT) {
            Ok(Ok(line)) => line,
            Ok(Err(e)) => return Err(format!("reading the {} server's address: {e}", contender.name())),
            Err(_) => return Err(format!("the {} server printed no address", contender.name())),
        };
        process.addr = line.trim().parse().map_err(|e| format!("{} server printed {line:?}: {e}", contender.name()))?;
        if !process.addr.ip().is_loopback() {
            return Err(format!("the {} server bound {}", contender.name(), process.addr));
        }
        Ok(process)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + EXIT_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---- The load generator ----

/// One keep-alive HTTP/1.1 client connection.
struct Conn {
    send: SendRequest<Full<Bytes>>,
}

impl Conn {
    async fn connect(addr: SocketAddr) -> Result<Conn, String> {
        let stream = TcpStream::connect(addr).await.map_err(|e| format!("connecting to {addr}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (send, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn { send })
    }

    /// Sends one request and reads its whole answer.
    async fn send(
        &mut self,
        method: Method,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<(StatusCode, HeaderMap, Bytes), hyper::Error> {
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = Uri::from_static(PATH);
        *request.headers_mut() = headers.clone();
        self.send.ready().await?;
        let response = self.send.send_request(request).await?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await?.to_bytes();
        Ok((parts.status, parts.headers, body))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Era {
    Session,
    Stateless,
}

/// The `Authorization` header of every request in the bearer-validation mode.
static BEARER: std::sync::OnceLock<HeaderValue> = std::sync::OnceLock::new();

/// The headers of every request: `Host`, `Accept`, `Content-Type`, and in the bearer-validation mode
/// `Authorization`.
fn base_headers(addr: SocketAddr) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(bearer) = BEARER.get() {
        headers.insert(AUTHORIZATION, bearer.clone());
    }
    headers.insert(HOST, HeaderValue::from_str(&format!("127.0.0.1:{}", addr.port())).expect("a valid host"));
    headers.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers
}

/// The headers of a request within a session.
fn session_headers(addr: SocketAddr, session: &HeaderValue) -> HeaderMap {
    let mut headers = base_headers(addr);
    headers.insert(SESSION_HEADER, session.clone());
    headers.insert(PROTOCOL_HEADER, HeaderValue::from_static(SESSION_REVISION));
    headers
}

/// The headers of a stateless `tools/call`.
fn stateless_headers(addr: SocketAddr) -> HeaderMap {
    let mut headers = base_headers(addr);
    headers.insert(PROTOCOL_HEADER, HeaderValue::from_static(STATELESS_REVISION));
    headers.insert(METHOD_HEADER, HeaderValue::from_static("tools/call"));
    headers.insert(NAME_HEADER, HeaderValue::from_static(TOOL));
    headers
}

/// The body of `tools/call` number `id`.
fn call_body(era: Era, id: u64) -> Bytes {
    let text = match era {
        Era::Session => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{TOOL}","arguments":{{}}}}}}"#
        ),
        Era::Stateless => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{TOOL}","arguments":{{}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"{STATELESS_REVISION}","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"bench","version":"0.1"}}}}}}}}"#
        ),
    };
    Bytes::from(text)
}

/// Whether an answer is the tool's successful result.
fn answered(status: StatusCode, body: &[u8]) -> bool {
    status == StatusCode::OK && body.windows(TEXT.len()).any(|w| w == TEXT.as_bytes())
}

async fn step<T>(what: &str, f: impl Future<Output = Result<T, String>>) -> Result<T, String> {
    tokio::time::timeout(SETUP_TIMEOUT, f).await.map_err(|_| format!("{what} timed out"))?
}

/// `initialize` then `notifications/initialized` on `conn`: the headers of the session's requests.
async fn open_session(conn: &mut Conn, addr: SocketAddr) -> Result<(HeaderValue, HeaderMap), String> {
    let (status, headers, body) = conn
        .send(Method::POST, &base_headers(addr), Bytes::from_static(INITIALIZE.as_bytes()))
        .await
        .map_err(|e| e.to_string())?;
    let Some(session) = headers.get(SESSION_HEADER).filter(|_| status == StatusCode::OK) else {
        return Err(format!("initialize answered {status}: {}", String::from_utf8_lossy(&body)));
    };
    let session = session.clone();
    let headers = session_headers(addr, &session);
    let (status, _, body) = conn
        .send(Method::POST, &headers, Bytes::from_static(INITIALIZED.as_bytes()))
        .await
        .map_err(|e| e.to_string())?;
    if status != StatusCode::ACCEPTED {
        return Err(format!("notifications/initialized answered {status}: {}", String::from_utf8_lossy(&body)));
    }
    Ok((session, headers))
}

/// What one connection recorded.
#[derive(Default)]
struct Record {
    latencies: Vec<Duration>,
    failures: u64,
}

/// One connection's load: calls back to back until `until`; records the calls completed within `[from, until]`.
async fn worker(mut conn: Conn, era: Era, headers: HeaderMap, first_id: u64, from: Instant, until: Instant) -> Record {
    let mut record = Record::default();
    let mut id = first_id;
    loop {
        let start = Instant::now();
        if start >= until {
            break;
        }
        id += 1;
        let body = call_body(era, id);
        let outcome = tokio::time::timeout(CALL_TIMEOUT, conn.send(Method::POST, &headers, body)).await;
        let end = Instant::now();
        match outcome {
            Ok(Ok((status, _, body))) if answered(status, &body) => {
                if end >= from && end <= until {
                    record.latencies.push(end - start);
                }
            }
            Ok(Ok(_)) => record.failures += 1,
            // The connection is broken or stuck: give it up.
            Ok(Err(_)) | Err(_) => {
                record.failures += 1;
                break;
            }
        }
    }
    record
}

/// How the load of one scenario is laid out.
#[derive(Clone, Copy)]
struct Scenario {
    label: &'static str,
    era: Era,
    /// Sessions (session era) or independent groups of connections (stateless era).
    groups: usize,
    /// Connections per group.
    per_group: usize,
}

const SCENARIOS: [Scenario; 5] = [
    Scenario { label: "session, 1 connection", era: Era::Session, groups: 1, per_group: 1 },
    Scenario { label: "session, 1 session x 50 connections", era: Era::Session, groups: 1, per_group: 50 },
    Scenario { label: "session, 100 sessions x 2 connections", era: Era::Session, groups: 100, per_group: 2 },
    Scenario { label: "stateless, 1 connection", era: Era::Stateless, groups: 1, per_group: 1 },
    Scenario { label: "stateless, 50 connections", era: Era::Stateless, groups: 1, per_group: 50 },
];

/// One measurement's figures.
#[derive(Clone, Copy)]
struct Measurement {
    calls_per_s: f64,
    p50: Duration,
    p99: Duration,
    failures: u64,
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// One measurement of `scenario` against the server at `addr`: fresh connections and sessions, warm-up, window,
/// then the sessions are deleted.
async fn measure(addr: SocketAddr, scenario: Scenario, window: Duration) -> Result<Measurement, String> {
    let mut sessions = Vec::new();
    let result = load(addr, scenario, window, &mut sessions).await;
    // Close the sessions even when the measurement failed, so the next one finds the server as this one did.
    if !sessions.is_empty() {
        let mut conn = step("connecting", Conn::connect(addr)).await?;
        for session in &sessions {
            let mut headers = session_headers(addr, session);
            headers.remove(CONTENT_TYPE);
            let (status, _, body) = step("DELETE", async {
                conn.send(Method::DELETE, &headers, Bytes::new()).await.map_err(|e| e.to_string())
            })
            .await?;
            if !status.is_success() {
                return Err(format!("DELETE of a session answered {status}: {}", String::from_utf8_lossy(&body)));
            }
        }
    }
    result
}

async fn load(
    addr: SocketAddr,
    scenario: Scenario,
    window: Duration,
    sessions: &mut Vec<HeaderValue>,
) -> Result<Measurement, String> {
    // Connections (and sessions) first, then one probe call on each group's first connection.
    let mut groups = Vec::with_capacity(scenario.groups);
    for _ in 0..scenario.groups {
        let mut conns = Vec::with_capacity(scenario.per_group);
        for _ in 0..scenario.per_group {
            conns.push(step("connecting", Conn::connect(addr)).await?);
        }
        let headers = match scenario.era {
            Era::Session => {
                let (session, headers) = step("opening a session", open_session(&mut conns[0], addr)).await?;
                sessions.push(session);
                headers
            }
            Era::Stateless => stateless_headers(addr),
        };
        let probe = async {
            let (status, _, body) =
                conns[0].send(Method::POST, &headers, call_body(scenario.era, 1)).await.map_err(|e| e.to_string())?;
            if answered(status, &body) {
                Ok(())
            } else {
                Err(format!("tools/call answered {status}: {}", String::from_utf8_lossy(&body)))
            }
        };
        step("the first call", probe).await?;
        groups.push((conns, headers));
    }

    let from = Instant::now() + WARM_UP;
    let until = from + window;
    let mut workers = Vec::with_capacity(scenario.groups * scenario.per_group);
    for (conns, headers) in groups {
        for (i, conn) in conns.into_iter().enumerate() {
            // Ids unique within a session: each connection of a group counts from its own base.
            let first_id = (i as u64 + 1) * 1_000_000_000;
            workers.push(tokio::spawn(worker(conn, scenario.era, headers.clone(), first_id, from, until)));
        }
    }
    let mut latencies = Vec::new();
    let mut failures = 0;
    for handle in workers {
        let record = tokio::time::timeout_at((until + CALL_TIMEOUT + SETUP_TIMEOUT).into(), handle)
            .await
            .map_err(|_| "a connection did not finish".to_owned())?
            .map_err(|e| e.to_string())?;
        latencies.extend(record.latencies);
        failures += record.failures;
    }
    if latencies.is_empty() {
        return Err(format!("no call completed ({failures} failed)"));
    }
    latencies.sort_unstable();
    Ok(Measurement {
        calls_per_s: latencies.len() as f64 / window.as_secs_f64(),
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
        failures,
    })
}

// ---- The rounds and the table ----

fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 })
}

fn ms(seconds: Option<f64>) -> String {
    seconds.map_or_else(|| "n/a".to_owned(), |s| format!("{:.3} ms", s * 1e3))
}

fn bench(args: &[String]) -> Result<(), String> {
    let seconds: f64 = match args.first() {
        Some(s) => s.parse().map_err(|e| format!("SECONDS_PER_ROUND {s:?}: {e}"))?,
        None => 3.0,
    };
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= 3600.0) {
        return Err(format!("SECONDS_PER_ROUND must be in (0, 3600], not {seconds}"));
    }
    let rounds: usize = match args.get(1) {
        Some(s) => s.parse().map_err(|e| format!("ROUNDS {s:?}: {e}"))?,
        None => 3,
    };
    if rounds == 0 {
        return Err("ROUNDS must be at least 1".to_owned());
    }
    if args.len() > 2 {
        return Err("usage: mcp_http [SECONDS_PER_ROUND] [ROUNDS]".to_owned());
    }
    let window = Duration::from_secs_f64(seconds);

    if auth_mode() && baseline().is_some() {
        return Err("MCP_HTTP_AUTH and MCP_HTTP_BASELINE cannot be used together".to_owned());
    }
    let signer = if auth_mode() { Some(auth::Signer::generate()?) } else { None };
    let jwks = signer.as_ref().map(auth::Signer::jwks);
    let keel = ServerProcess::start(Contender::Keel, jwks.as_deref())?;
    let rmcp = ServerProcess::start(Contender::Rmcp, None)?;
    if let Some(signer) = &signer {
        let token = signer.token(&resource_uri(keel.addr))?;
        let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|e| e.to_string())?;
        BEARER.set(value).map_err(|_| "the token was set twice".to_owned())?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;

    // results[scenario][contender][round]
    let mut results = vec![[Vec::with_capacity(rounds), Vec::with_capacity(rounds)]; SCENARIOS.len()];
    runtime.block_on(async {
        for round in 0..rounds {
            for (s, scenario) in SCENARIOS.iter().enumerate() {
                let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
                for c in order {
                    let (contender, server) = if c == 0 { (Contender::Keel, &keel) } else { (Contender::Rmcp, &rmcp) };
                    let outcome = measure(server.addr, *scenario, window).await;
                    match &outcome {
                        Ok(m) => eprintln!(
                            "round {}/{rounds} {} {}: {:.0} calls/s, p50 {}, p99 {}, {} failed",
                            round + 1,
                            scenario.label,
                            contender.name(),
                            m.calls_per_s,
                            ms(Some(m.p50.as_secs_f64())),
                            ms(Some(m.p99.as_secs_f64())),
                            m.failures
                        ),
                        Err(e) => {
                            eprintln!("round {}/{rounds} {} {}: n/a ({e})", round + 1, scenario.label, contender.name())
                        }
                    }
                    results[s][c].push(outcome.ok());
                }
            }
        }
    });
    drop(runtime);
    drop(keel);
    drop(rmcp);

    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    println!(
        "MCP over Streamable HTTP, `{TOOL}`: {rounds} round(s) x {seconds} s per measurement (after {} s of \
         warm-up), {cpus} CPU(s); medians over rounds; ratios are the median over rounds of {keel}/{other}.{auth}",
        WARM_UP.as_secs_f64(),
        keel = Contender::Keel.name(),
        other = Contender::Rmcp.name(),
        auth = if auth_mode() { " Every request carries an ES256 bearer token; only keel+auth checks it." } else { "" },
    );
    println!();
    println!(
        "| scenario | contender | calls/s | p50 | p99 | failures | calls/s {keel}/{other} | p50 {keel}/{other} |",
        keel = Contender::Keel.name(),
        other = Contender::Rmcp.name()
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for (s, scenario) in SCENARIOS.iter().enumerate() {
        let [keel, rmcp] = &results[s];
        let ratio = |f: fn(&Measurement) -> f64| {
            median(
                keel.iter()
                    .zip(rmcp)
                    .filter_map(|(k, r)| Some(f(k.as_ref()?) / f(r.as_ref()?)))
                    .filter(|x| x.is_finite())
                    .collect(),
            )
        };
        let calls_ratio = ratio(|m| m.calls_per_s);
        let p50_ratio = ratio(|m| m.p50.as_secs_f64());
        for (c, measurements) in [keel, rmcp].into_iter().enumerate() {
            let done: Vec<&Measurement> = measurements.iter().flatten().collect();
            let calls = median(done.iter().map(|m| m.calls_per_s).collect());
            let p50 = median(done.iter().map(|m| m.p50.as_secs_f64()).collect());
            let p99 = median(done.iter().map(|m| m.p99.as_secs_f64()).collect());
            let failures: u64 = done.iter().map(|m| m.failures).sum();
            let missing = rounds - done.len();
            let failures = if missing > 0 && !done.is_empty() {
                format!("{failures} ({missing} n/a)")
            } else {
                failures.to_string()
            };
            let (calls_ratio, p50_ratio) = if c == 0 {
                (
                    calls_ratio.map_or_else(|| "n/a".to_owned(), |r| format!("{r:.2}")),
                    p50_ratio.map_or_else(|| "n/a".to_owned(), |r| format!("{r:.2}")),
                )
            } else {
                (String::new(), String::new())
            };
            println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                scenario.label,
                if c == 0 { Contender::Keel.name() } else { Contender::Rmcp.name() },
                calls.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.0}")),
                ms(p50),
                ms(p99),
                if done.is_empty() { "n/a".to_owned() } else { failures },
                calls_ratio,
                p50_ratio
            );
        }
    }
    println!();
    println!("Per round, calls/s {}/{}:", Contender::Keel.name(), Contender::Rmcp.name());
    println!();
    for (s, scenario) in SCENARIOS.iter().enumerate() {
        let [keel, rmcp] = &results[s];
        let per_round: Vec<String> = keel
            .iter()
            .zip(rmcp)
            .map(|(k, r)| match (k, r) {
                (Some(k), Some(r)) => format!("{:.3}", k.calls_per_s / r.calls_per_s),
                _ => "n/a".to_owned(),
            })
            .collect();
        println!("- {}: {}", scenario.label, per_round.join(", "));
    }
    Ok(())
}
