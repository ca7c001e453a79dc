//! keel's protected MCP server with opaque tokens checked by token introspection (RFC 7662), over real HTTP on
//! loopback: a small introspection endpoint is served here (hyper), checks the resource server's client
//! credentials, answers per token and counts the requests it gets.
//!
//! `cargo test -p keel-tools-mcp --features auth --test mcp -- introspection::`

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use keel_tools_core::{CallContext, Executor, Registry, ToolError, tool};
use keel_tools_mcp::http::HttpConfig;
use keel_tools_mcp::http::auth::{ClientAuthMethod, IntrospectionVerifier, ResourceServer};
use keel_tools_mcp::server::McpServer;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Says whom the call is for.
#[tool(name = "introspection.whoami", effect = "read", version = "1.0")]
async fn whoami(ctx: CallContext) -> Result<String, ToolError> {
    Ok(ctx.principal().unwrap_or("nobody").to_owned())
}

/// Reads a ticket.
#[tool(name = "tickets.read", effect = "read", version = "1.0", scopes = ["tickets.read"])]
async fn tickets_read() -> Result<String, ToolError> {
    Ok("read".into())
}

/// Changes a ticket.
#[tool(name = "tickets.write", effect = "read", version = "1.0", scopes = ["tickets.write"])]
async fn tickets_write() -> Result<String, ToolError> {
    Ok("written".into())
}

const ISSUER: &str = "https://auth.keel.test";
/// How long the endpoint takes to answer about a token starting `t-lag`.
const LAG: Duration = Duration::from_millis(200);
const CLIENT_ID: &str = "mcp resource";
const CLIENT_SECRET: &str = "s3cret&=+";

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// `application/x-www-form-urlencoded` decoding of one name or value.
fn form_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

fn form(body: &str) -> HashMap<String, String> {
    body.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (form_decode(k), form_decode(v))
        })
        .collect()
}

/// What the endpoint saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    content_type: Option<String>,
    authorization: Option<String>,
    form: HashMap<String, String>,
}

/// The introspection endpoint: the answers it gives per token (a token it does not know is inactive), how many
/// requests it got, and what it saw of the last one.
#[derive(Clone)]
struct Endpoint {
    answers: Arc<Mutex<HashMap<String, Value>>>,
    requests: Arc<AtomicUsize>,
    last: Arc<Mutex<Option<Seen>>>,
    /// Requests being answered now, and the most at once.
    in_flight: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    /// A token starting `t-slow` is answered only once a permit is released here; one starting `t-lag` after
    /// [`LAG`].
    hold: Arc<tokio::sync::Semaphore>,
}

impl Default for Endpoint {
    fn default() -> Endpoint {
        Endpoint {
            answers: Arc::default(),
            requests: Arc::default(),
            last: Arc::default(),
            in_flight: Arc::default(),
            peak: Arc::default(),
            hold: Arc::new(tokio::sync::Semaphore::new(0)),
        }
    }
}

impl Endpoint {
    fn answer(&self, token: &str, answer: Value) {
        self.answers.lock().unwrap().insert(token.to_owned(), answer);
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// The most requests it was answering at once.
    fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    /// Lets `n` held requests answer.
    fn release(&self, n: usize) {
        self.hold.add_permits(n);
    }

    /// Whether the request authenticates the resource server: `client_secret_basic` (the id and secret
    /// form-urlencoded, then Base64) or `client_secret_post`.
    fn authenticated(seen: &Seen) -> bool {
        use base64::Engine as _;
        let basic = seen.authorization.as_deref().and_then(|a| a.strip_prefix("Basic ")).and_then(|b| {
            let decoded = base64::engine::general_purpose::STANDARD.decode(b).ok()?;
            let text = String::from_utf8(decoded).ok()?;
            let (id, secret) = text.split_once(':')?;
            Some((form_decode(id), form_decode(secret)))
        });
        let post = seen.form.get("client_id").cloned().zip(seen.form.get("client_secret").cloned());
        match (basic, post) {
            (Some(credentials), None) | (None, Some(credentials)) => {
                credentials == (CLIENT_ID.to_owned(), CLIENT_SECRET.to_owned())
            }
            _ => false,
        }
    }

    async fn handle(&self, request: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let response = self.answer_to(request).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        response
    }

    async fn answer_to(&self, request: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
        let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let (content_type, authorization) = (header("content-type"), header("authorization"));
        let method = request.method().clone();
        let body = request.into_body().collect().await.unwrap().to_bytes();
        let seen = Seen { content_type, authorization, form: form(std::str::from_utf8(&body).unwrap()) };
        *self.last.lock().unwrap() = Some(seen.clone());
        let respond = |status: StatusCode, body: String| {
            let mut response = Response::new(Full::new(Bytes::from(body)));
            *response.status_mut() = status;
            response
        };
        if method != hyper::Method::POST
            || seen.content_type.as_deref() != Some("application/x-www-form-urlencoded")
            || seen.form.get("token_type_hint").map(String::as_str) != Some("access_token")
        {
            return respond(StatusCode::BAD_REQUEST, json!({"error": "invalid_request"}).to_string());
        }
        if !Endpoint::authenticated(&seen) {
            return respond(StatusCode::UNAUTHORIZED, json!({"error": "invalid_client"}).to_string());
        }
        let token = seen.form.get("token").cloned().unwrap_or_default();
        if token.starts_with("t-slow") {
            self.hold.acquire().await.unwrap().forget();
        }
        if token.starts_with("t-lag") {
            tokio::time::sleep(LAG).await;
        }
        match token.as_str() {
            "t-fails" => respond(StatusCode::INTERNAL_SERVER_ERROR, "upstream trouble".into()),
            "t-garbage" => respond(StatusCode::OK, "<html>not json</html>".into()),
            _ => {
                let answer = self.answers.lock().unwrap().get(&token).cloned().unwrap_or(json!({"active": false}));
                respond(StatusCode::OK, answer.to_string())
            }
        }
    }

    /// Serves the endpoint on a free loopback port; its URL.
    async fn serve(&self) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/oauth2/introspect", listener.local_addr().unwrap());
        let endpoint = self.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let endpoint = endpoint.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let endpoint = endpoint.clone();
                        async move { Ok::<_, std::convert::Infallible>(endpoint.handle(req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        url
    }
}

/// An active token's answer for `subject` with `scope`, for `audience`.
fn active(audience: &str, subject: &str, scope: &str) -> Value {
    json!({"active": true, "sub": subject, "scope": scope, "aud": audience, "iss": ISSUER,
        "client_id": "mcp-app", "token_type": "Bearer", "exp": now() + 300, "iat": now()})
}

/// Serves a keel MCP server on a free loopback port, its tokens checked by the verifier `make` builds for the
/// resource URI; the base URL.
async fn serve(make: impl FnOnce(&str) -> IntrospectionVerifier) -> (String, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let resource = format!("{base}/mcp");
    let verifier = make(&resource);
    let view = Registry::from_inventory()
        .unwrap()
        .view()
        .names(["introspection.whoami", "tickets.read", "tickets.write"])
        .build()
        .unwrap();
    let server = McpServer::new(Executor::new(view).unwrap()).unwrap();
    let protected = ResourceServer::new(resource, verifier).authorization_server(ISSUER);
    let service = server.http_service(HttpConfig::default().auth(protected));
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move { service.serve(listener, "/mcp", stop).await });
    (base, shutdown)
}

/// The verifier of these tests: the endpoint at `url`, this resource, the right credentials, `client_secret_basic`.
fn verifier(url: &str, resource: &str) -> IntrospectionVerifier {
    IntrospectionVerifier::new(url, resource).unwrap().client_credentials(CLIENT_ID, CLIENT_SECRET).issuer(ISSUER)
}

/// One JSON-RPC POST to `/mcp`: the status, the `WWW-Authenticate` and `Mcp-Session-Id` headers, and the body
/// (the last SSE event's data when the answer is a stream).
async fn post(
    base: &str,
    token: Option<&str>,
    session: Option<&str>,
    body: Value,
) -> (u16, Option<String>, Option<String>, Value) {
    let client = reqwest::Client::new();
    let mut request = client
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .body(body.to_string());
    if let Some(t) = token {
        request = request.header("authorization", format!("Bearer {t}"));
    }
    if let Some(s) = session {
        request = request.header("mcp-session-id", s);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let (challenge, session) = (header("www-authenticate"), header("mcp-session-id"));
    let text = response.text().await.unwrap();
    let data = text
        .lines()
        .rev()
        .filter_map(|l| l.strip_prefix("data:").map(str::trim))
        .find(|d| !d.is_empty())
        .unwrap_or(&text)
        .to_owned();
    (status, challenge, session, serde_json::from_str(&data).unwrap_or(Value::String(text)))
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {}, "clientInfo": {"name": "introspection-test", "version": "1"}}})
}

/// Opens a session with `token`; its id.
async fn open(base: &str, token: &str) -> String {
    let (status, _, session, body) = post(base, Some(token), None, initialize()).await;
    assert_eq!(status, 200, "{body}");
    let session = session.expect("a session id");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, ..) = post(base, Some(token), Some(&session), initialized).await;
    assert_eq!(status, 202);
    session
}

/// Calls `tool`: the status, the `WWW-Authenticate` header, and the tool's text (or the body, when it did not
/// answer).
async fn call(base: &str, token: &str, session: &str, tool: &str) -> (u16, Option<String>, Value) {
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": {}}});
    let (status, challenge, _, body) = post(base, Some(token), Some(session), call).await;
    let text = body.pointer("/result/content/0/text").and_then(Value::as_str);
    match text.and_then(|t| serde_json::from_str::<Value>(t).ok()) {
        Some(seen) => (status, challenge, seen),
        None => (status, challenge, body),
    }
}

/// A token refused: `401` with `error="invalid_token"` whose description says `says`, and no session.
async fn assert_refused(base: &str, token: &str, says: &str) {
    let (status, challenge, session, body) = post(base, Some(token), None, initialize()).await;
    assert_eq!(status, 401, "{token}: {body}");
    assert!(session.is_none(), "{token}: no session for a refused token");
    let challenge = challenge.unwrap_or_default();
    assert!(challenge.contains("error=\"invalid_token\""), "{token}: {challenge}");
    assert!(challenge.contains(says), "{token}: {challenge} should say {says:?}");
    assert!(challenge.contains("resource_metadata=\""), "{token}: {challenge}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_active_token_lists_and_calls_as_its_subject() {
    let endpoint = Endpoint::default();
    let url = endpoint.serve().await;
    let (base, _stop) = serve(|resource| verifier(&url, resource)).await;
    let resource = format!("{base}/mcp");
    endpoint.answer("t-alice", active(&resource, "alice", "tickets.read tickets.write"));

    let session = open(&base, "t-alice").await;
    let seen = endpoint.last.lock().unwrap().clone().expect("the endpoint was asked");
    assert_eq!(seen.form.get("token").map(String::as_str), Some("t-alice"));
    assert_eq!(seen.form.get("token_type_hint").map(String::as_str), Some("access_token"));
    assert!(seen.authorization.as_deref().is_some_and(|a| a.starts_with("Basic ")), "client_secret_basic");
    assert!(!seen.form.contains_key("client_secret"), "no secret in the body with client_secret_basic");

    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    let (status, _, _, body) = post(&base, Some("t-alice"), Some(&session), list).await;
    assert_eq!(status, 200, "{body}");
    let mut listed: Vec<&str> =
        body["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    listed.sort_unstable();
    assert_eq!(listed, ["introspection.whoami", "tickets.read", "tickets.write"]);
    assert_eq!(call(&base, "t-alice", &session, "introspection.whoami").await.2, json!("alice"));
    assert_eq!(call(&base, "t-alice", &session, "tickets.write").await.2, json!("written"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_the_endpoint_does_not_vouch_for_are_refused_401() {
    let endpoint = Endpoint::default();
    let url = endpoint.serve().await;
    let (base, _stop) = serve(|resource| verifier(&url, resource)).await;
    let resource = format!("{base}/mcp");
    let mut expired = active(&resource, "alice", "");
    expired["exp"] = json!(now() - 600);
    endpoint.answer("t-expired", expired);
    endpoint.answer("t-inactive", json!({"active": false, "sub": "alice", "aud": resource}));
    endpoint.answer("t-other-audience", active("https://other.example/mcp", "alice", ""));
    let mut no_subject = active(&resource, "alice", "");
    no_subject.as_object_mut().unwrap().remove("sub");
    no_subject["username"] = json!("alice");
    endpoint.answer("t-no-subject", no_subject);
    let mut other_issuer = active(&resource, "alice", "");
    other_issuer["iss"] = json!("https://evil.example");
    endpoint.answer("t-other-issuer", other_issuer);

    assert_refused(&base, "t-inactive", "the token is not active").await;
    assert_refused(&base, "t-unknown", "the token is not active").await;
    assert_refused(&base, "t-expired", "the token has expired").await;
    assert_refused(&base, "t-other-audience", "the token is for another resource").await;
    assert_refused(&base, "t-no-subject", "the token has no subject").await;
    assert_refused(&base, "t-other-issuer", "the token is from another issuer").await;
    // The endpoint failing is told apart from an inactive token, and still refused with the standard 401.
    assert_refused(&base, "t-fails", "the token cannot be checked now").await;
    assert_refused(&base, "t-garbage", "the token cannot be checked now").await;
    assert_eq!(endpoint.requests(), 8, "each refusal asked the endpoint once");
    // A refusal is kept for the refusal TTL; an endpoint's failure is not.
    assert_refused(&base, "t-inactive", "the token is not active").await;
    assert_refused(&base, "t-other-audience", "the token is for another resource").await;
    assert_eq!(endpoint.requests(), 8, "refused again without asking");
    assert_refused(&base, "t-fails", "the token cannot be checked now").await;
    assert_eq!(endpoint.requests(), 9, "a failure to check is asked about again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_client_credentials_refuse_every_token() {
    let endpoint = Endpoint::default();
    let url = endpoint.serve().await;
    let (base, _stop) = serve(|resource| {
        IntrospectionVerifier::new(&url, resource).unwrap().client_credentials(CLIENT_ID, "not the secret")
    })
    .await;
    endpoint.answer("t-alice", active(&format!("{base}/mcp"), "alice", ""));
    assert_refused(&base, "t-alice", "the token cannot be checked now").await;
    assert_eq!(endpoint.requests(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_secret_post_sends_the_credentials_in_the_body() {
    let endpoint = Endpoint::default();
    let url = endpoint.serve().await;
    let (base, _stop) =
        serve(|resource| verifier(&url, resource).client_auth_method(ClientAuthMethod::ClientSecretPost)).await;
    endpoint.answer("t-bob", active(&format!("{base}/mcp"), "bob", ""));
    let session = open(&base, "t-bob").await;
    assert_eq!(call(&base, "t-bob", &session, "introspection.whoami").await.2, json!("bob"));
    let seen = endpoint.last.lock().unwrap().clone().unwrap();
    assert!(seen.authorization.is_none(), "no Authorization header with client_secret_post");
    assert_eq!(seen.form.get("client_secret").map(String::as_str), Some(CLIENT_SECRET));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_scope_the_token_lacks_is_refused_403() {
    let endpoint = Endpoint::default();
    let url = endpoint.serve().await;
    let (base, _stop) = serve(|resource| verifier(&url, resource)).await;
    endpoint.answer("t-reader", active(&format!("{base}/mcp"), "reader", "tickets.read"));
    let session = open(&base, "t-reader").await;
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    let (_, _, _, body) = post(&base, Some("t-reader"), Some(&session), list).await;
    let mut listed: Vec<&str> =
        body["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    listed.sort_unstable();
    assert_eq!(listed, ["introspection.whoami", "tickets.read"], "the list leaves out what the scopes do not allow");
    assert_eq!(call(&base, "t-reader", &session, "tickets.read").await.2, json!("read"));
    let (status, challenge, body) = call(&base, "t-reader", &session, "tickets.write").await;
    assert_eq!(status, 403, "{body}");
    let challenge = challenge.unwrap_or_default();
    assert!(challenge.contains("error=\"insufficient_scope\""), "{challenge}");
    assert!(challenge.contains("tickets.write"), "{challenge}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_is_down_refuses_401_and_the_server_keeps_serving() {
    // A port nothing listens on.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/introspect", closed.local_addr().unwrap());
    drop(closed);
    let (base, _stop) = serve(|resource| verifier(&url, resource).timeout(Duration::from_secs(5))).await;
    for _ in 0..3 {
        assert_refused(&base, "t-alice", "the token cannot be checked now").await;
    }
    let metadata: Value =
        reqwest::get(format!("{base}/.well-known/oauth-protected-resource/mcp")).await.unwrap().json().await.unwrap();
    assert_eq!(metadata["resource"], format!("{base}/mcp"), "the server still answers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_token_is_asked_about_once() {
    let endpoint = Endpoint::default();
    let url = endpoint.serve().await;
    let (base, _stop) = serve(|resource| verifier(&url, resource)).await;
    let resource = format!("{base}/mcp");
    endpoint.answer("t-alice", active(&resource, "alice", ""));
    endpoint.answer("t-bob", active(&resource, "bob", ""));

    let session = open(&base, "t-alice").await;
    assert_eq!(endpoint.requests(), 1, "initialize and notifications/initialized: one introspection");
    assert_eq!(call(&base, "t-alice", &session, "introspection.whoami").await.2, json!("alice"));
    assert_eq!(call(&base, "t-alice", &session, "introspection.whoami").await.2, json!("alice"));
    assert_eq!(endpoint.requests(), 1, "the calls with the same token were served from the cache");
    open(&base, "t-bob").await;
    assert_eq!(endpoint.requests(), 2, "another token is asked about");

    // Without a cache, every request asks.
    let uncached = Endpoint::default();
    let url = uncached.serve().await;
    let (base, _stop) = serve(|resource| verifier(&url, resource).cache_ttl(Duration::ZERO)).await;
    uncached.answer("t-alice", active(&format!("{base}/mcp"), "alice", ""));
    let session = open(&base, "t-alice").await;
    call(&base, "t-alice", &session, "introspection.whoami").await;
    assert_eq!(uncached.requests(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_token_is_asked_about_again_after_its_ttl() {
    let endpoint = Endpoint::default();
    let url = endpoint.serve().await;
    let (base, _stop) = serve(|resource| verifier(&url, resource).cache_ttl(Duration::from_secs(3))).await;
    endpoint.answer("t-alice", active(&format!("{base}/mcp"), "alice", ""));
    let session = open(&base, "t-alice").await;
    assert_eq!(endpoint.requests(), 1);
    // Revoked at the authorization server: accepted from the cache until the TTL has passed, then refused.
    endpoint.answer("t-alice", json!({"active": false}));
    assert_eq!(call(&base, "t-alice", &session, "introspection.whoami").await.0, 200);
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let (status, challenge, _) = call(&base, "t-alice", &session, "introspection.whoami").await;
    assert_eq!(status, 401);
    assert!(challenge.unwrap_or_default().contains("the token is not active"));
    assert_eq!(endpoint.requests(), 2);
}

/// At most `max_concurrent` introspection requests are in flight at once: with two permits, five new tokens at
/// once reach the endpoint two at a time, each in turn as a permit comes free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn introspection_requests_in_flight_are_capped() {
    use keel_tools_mcp::http::auth::TokenVerifier;
    let endpoint = Endpoint::default();
    let url = endpoint.serve().await;
    let resource = "http://127.0.0.1:9/mcp";
    let tokens: Vec<String> = (0..5).map(|i| format!("t-slow-{i}")).collect();
    for (i, token) in tokens.iter().enumerate() {
        endpoint.answer(token, active(resource, &format!("user{i}"), ""));
    }
    let verifier = Arc::new(verifier(&url, resource).max_concurrent(2).timeout(Duration::from_secs(20)));
    let mut checks = tokio::task::JoinSet::new();
    for token in tokens {
        let verifier = verifier.clone();
        checks.spawn(async move { verifier.verify(&token).await.map(|p| p.subject.clone()) });
    }
    // The endpoint holds every slow token until let go: two arrive, the other three wait for a permit.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(endpoint.requests(), 2, "two requests in flight, no more");
    // The two are answered: two of the waiting take their permits and are held in turn; the last still waits.
    endpoint.release(2);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(endpoint.requests(), 4, "two more in flight once two were answered");
    endpoint.release(16);
    let mut admitted = 0;
    while let Some(result) = checks.join_next().await {
        result.unwrap().expect("every token is active");
        admitted += 1;
    }
    assert_eq!(admitted, 5);
    assert_eq!(endpoint.requests(), 5);
    assert_eq!(endpoint.peak(), 2, "never more than two at once");
    assert_eq!(verifier.cached(), 5);
}

/// A token whose check does not end within the timeout, waiting for a permit or for the endpoint, is refused as
/// not checkable now, and nothing is cached for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_that_outlasts_the_timeout_is_refused_and_not_cached() {
    use keel_tools_mcp::http::auth::TokenVerifier;
    let endpoint = Endpoint::default();
    let url = endpoint.serve().await;
    let resource = "http://127.0.0.1:9/mcp";
    let tokens = ["t-slow-a", "t-slow-b"];
    for token in tokens {
        endpoint.answer(token, active(resource, token, ""));
    }
    let verifier = Arc::new(verifier(&url, resource).max_concurrent(1).timeout(Duration::from_millis(400)));
    let mut checks = tokio::task::JoinSet::new();
    for token in tokens {
        let verifier = verifier.clone();
        checks.spawn(async move { verifier.verify(token).await.map(|p| p.subject.clone()) });
    }
    let mut refused = Vec::new();
    while let Some(result) = checks.join_next().await {
        refused.push(result.unwrap().expect_err("the endpoint never answers").description().to_owned());
    }
    assert_eq!(refused, ["the token cannot be checked now"; 2]);
    assert_eq!(verifier.cached(), 0, "nothing cached for the refused tokens");
    endpoint.release(16);
}

/// 200 made-up tokens at once from one client (127.0.0.2), against an endpoint that takes 200 ms per answer and a
/// verifier of 4 requests in flight with a 2 s timeout, while another client (127.0.0.1) comes with a valid token
/// not yet cached: the valid token opens its session, and every made-up one is refused `401`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_made_up_tokens_does_not_starve_another_clients_valid_token() {
    let endpoint = Endpoint::default();
    let url = endpoint.serve().await;
    let (base, _stop) =
        serve(|resource| verifier(&url, resource).max_concurrent(4).timeout(Duration::from_secs(2))).await;
    endpoint.answer("t-lag-valid", active(&format!("{base}/mcp"), "alice", ""));
    let flooder = reqwest::Client::builder().local_address(std::net::IpAddr::from([127, 0, 0, 2])).build().unwrap();
    let mut flood = tokio::task::JoinSet::new();
    for i in 0..200 {
        let (flooder, base) = (flooder.clone(), base.clone());
        flood.spawn(async move {
            let response = flooder
                .post(format!("{base}/mcp"))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("authorization", format!("Bearer t-lag-made-up-{i}"))
                .body(initialize().to_string())
                .send()
                .await
                .unwrap();
            response.status().as_u16()
        });
    }
    // The flood has reached the endpoint.
    while endpoint.requests() < 4 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (status, challenge, session, body) = post(&base, Some("t-lag-valid"), None, initialize()).await;
    assert_eq!(status, 200, "{challenge:?} {body}");
    assert!(session.is_some());
    let mut refused = 0;
    while let Some(status) = flood.join_next().await {
        assert_eq!(status.unwrap(), 401);
        refused += 1;
    }
    assert_eq!(refused, 200);
}

/// The same flood at the verifier, each token with its client's address as the server passes it: 200 made-up tokens
/// at once from 127.0.0.2 and a valid token not yet cached from 127.0.0.1, against an endpoint that takes 200 ms
/// per answer, 4 requests in flight and a 2 s timeout (in turn, the flood alone would take 10 s). The valid token
/// is admitted; every made-up one is refused, most at once for their client's share, none admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_clients_flood_of_made_up_tokens_does_not_starve_another_clients_valid_token() {
    use keel_tools_mcp::http::auth::TokenVerifier;
    let endpoint = Endpoint::default();
    let url = endpoint.serve().await;
    let resource = "http://127.0.0.1:9/mcp";
    endpoint.answer("t-lag-valid", active(resource, "alice", ""));
    let verifier = Arc::new(verifier(&url, resource).max_concurrent(4).timeout(Duration::from_secs(2)));
    let (flooder, client) = (std::net::IpAddr::from([127, 0, 0, 2]), std::net::IpAddr::from([127, 0, 0, 1]));
    let mut flood = tokio::task::JoinSet::new();
    for i in 0..200 {
        let verifier = verifier.clone();
        flood.spawn(async move {
            verifier.verify_from(&format!("t-lag-made-up-{i}"), Some(flooder)).await.map(|p| p.subject.clone())
        });
    }
    while endpoint.requests() < 4 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let admitted = verifier.verify_from("t-lag-valid", Some(client)).await;
    assert_eq!(admitted.expect("the valid token is checked in its turn").subject, "alice");
    let (mut over_share, mut refused) = (0, 0);
    while let Some(result) = flood.join_next().await {
        let refusal = result.unwrap().expect_err("a made-up token is never admitted");
        over_share += usize::from(refusal.description() == "too many of this client's tokens are being checked now");
        refused += 1;
    }
    assert_eq!(refused, 200);
    assert!(over_share > 0, "the flood went past its client's share");
}
