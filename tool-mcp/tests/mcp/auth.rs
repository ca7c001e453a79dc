//! keel's MCP server over Streamable HTTP as an OAuth 2.1 protected resource (feature `auth`), over real HTTP on
//! loopback. Tokens are minted by the `jsonwebtoken` crate with ES256 keys made here (rcgen), and the server reads
//! the public keys from a JWKS: inline, or served on loopback and fetched again when a token names a new key.
//!
//! `cargo test -p keel-tools-mcp --features auth --test mcp -- auth::`

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use keel_tools_core::{CallContext, Executor, Registry, ToolError, tool};
use keel_tools_mcp::http::HttpConfig;
use keel_tools_mcp::http::auth::{JwtVerifier, Principal, ResourceServer, StaticTokens, TokenVerifier};
use keel_tools_mcp::server::McpServer;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::common;

/// Says whom the call is for.
#[tool(name = "auth.whoami", effect = "read", version = "1.0")]
async fn whoami(ctx: CallContext) -> Result<String, ToolError> {
    Ok(ctx.principal().unwrap_or("nobody").to_owned())
}

const ISSUER: &str = "https://auth.keel.test";

/// A signing key and its public JWK under `kid`.
struct Signer {
    key: EncodingKey,
    jwk: Jwk,
    kid: String,
}

fn signer(kid: &str) -> Signer {
    let pair = rcgen::KeyPair::generate().expect("an ES256 key");
    let key = EncodingKey::from_ec_pem(pair.serialize_pem().as_bytes()).expect("the key in PKCS#8");
    let mut jwk = Jwk::from_encoding_key(&key, Algorithm::ES256).expect("its public JWK");
    jwk.common.key_id = Some(kid.to_owned());
    Signer { key, jwk, kid: kid.to_owned() }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

impl Signer {
    fn token(&self, claims: Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, &claims, &self.key).expect("a token")
    }

    fn token_for(&self, audience: &str, subject: &str, scope: &str) -> String {
        self.token(json!({"iss": ISSUER, "aud": audience, "sub": subject, "scope": scope, "exp": now() + 300,
            "iat": now(), "client_id": "keel-test-client"}))
    }
}

fn jwks(signers: &[&Signer]) -> String {
    serde_json::to_string(&JwkSet { keys: signers.iter().map(|s| s.jwk.clone()).collect() }).unwrap()
}

/// Serves a keel MCP server with `resource` on a free loopback port; its base URL.
async fn serve(make: impl FnOnce(String) -> ResourceServer) -> (String, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let resource = make(format!("{base}/mcp"));
    let view = Registry::from_inventory().unwrap().view().names(["auth.whoami"]).build().unwrap();
    let server = McpServer::new(Executor::new(view).unwrap()).unwrap();
    let service = server.http_service(HttpConfig::default().auth(resource));
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move { service.serve(listener, "/mcp", stop).await });
    (base, shutdown)
}

/// One JSON-RPC POST to `/mcp`: the status, the `WWW-Authenticate` and `Mcp-Session-Id` headers, and the body
/// (the first SSE event's data when the answer is a stream).
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
    // An SSE answer starts with a priming event without data; the message is the last event with some.
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
        "capabilities": {}, "clientInfo": {"name": "auth-test", "version": "1"}}})
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

/// Calls `auth.whoami`: the status, and whom the tool saw (or the body, when it did not answer).
async fn call_whoami(base: &str, token: &str, session: &str) -> (u16, Value) {
    let call =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "auth.whoami", "arguments": {}}});
    let (status, _, _, body) = post(base, Some(token), Some(session), call).await;
    let text = body.pointer("/result/content/0/text").and_then(Value::as_str);
    match text.and_then(|t| serde_json::from_str::<Value>(t).ok()) {
        Some(seen) => (status, seen),
        None => (status, body),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_token_lists_and_calls_as_its_subject_and_the_metadata_says_where_to_get_one() {
    let signer = signer("k1");
    let keys = jwks(&[&signer]);
    let (base, _stop) = serve(|resource| {
        let verifier = JwtVerifier::from_jwks_json(ISSUER, &resource, &keys).unwrap();
        ResourceServer::new(resource, verifier).authorization_server(ISSUER).scopes_supported(["tools"])
    })
    .await;
    let resource = format!("{base}/mcp");

    let metadata: Value =
        reqwest::get(format!("{base}/.well-known/oauth-protected-resource/mcp")).await.unwrap().json().await.unwrap();
    assert_eq!(metadata["resource"], resource);
    assert_eq!(metadata["authorization_servers"], json!([ISSUER]));
    assert_eq!(metadata["scopes_supported"], json!(["tools"]));

    let (status, challenge, _, _) = post(&base, None, None, initialize()).await;
    assert_eq!(status, 401);
    let challenge = challenge.expect("WWW-Authenticate");
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\""),
        "no error for a request without a token"
    );

    let token = signer.token_for(&resource, "alice", "tools");
    let session = open(&base, &token).await;
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    let (status, _, _, body) = post(&base, Some(&token), Some(&session), list).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["tools"][0]["name"], "auth.whoami");
    assert_eq!(call_whoami(&base, &token, &session).await, (200, json!("alice")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_that_do_not_verify_are_refused_and_say_why() {
    let (trusted, stranger, unknown) = (signer("k1"), signer("k1"), signer("k2"));
    let keys = jwks(&[&trusted]);
    let (base, _stop) = serve(|resource| {
        ResourceServer::new(resource.clone(), JwtVerifier::from_jwks_json(ISSUER, &resource, &keys).unwrap())
    })
    .await;
    let resource = format!("{base}/mcp");
    let claims = |aud: &str, iss: &str, exp: u64| json!({"iss": iss, "aud": aud, "sub": "alice", "exp": exp});
    let b64 = |v: Value| {
        use base64::Engine as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
    };
    let unsigned = format!(
        "{}.{}.",
        b64(json!({"alg": "none", "typ": "JWT", "kid": "k1"})),
        b64(claims(&resource, ISSUER, now() + 300))
    );
    // The classic confusion: HS256 with the public key's bytes as the secret.
    let public = serde_json::to_vec(&trusted.jwk).unwrap();
    let mut hs = Header::new(Algorithm::HS256);
    hs.kid = Some("k1".into());
    let hmac =
        jsonwebtoken::encode(&hs, &claims(&resource, ISSUER, now() + 300), &EncodingKey::from_secret(&public).unwrap())
            .unwrap();
    let cases = [
        ("expired", trusted.token(claims(&resource, ISSUER, now() - 600)), "expired"),
        (
            "another audience",
            trusted.token(claims("https://other.example/mcp", ISSUER, now() + 300)),
            "another resource",
        ),
        ("another issuer", trusted.token(claims(&resource, "https://evil.example", now() + 300)), "another issuer"),
        ("another key, same kid", stranger.token(claims(&resource, ISSUER, now() + 300)), "signature"),
        ("an unknown kid", unknown.token(claims(&resource, ISSUER, now() + 300)), "unknown"),
        ("alg none", unsigned, "not a signed JWT"),
        ("HS256 with the public key", hmac, "not accepted"),
        ("not a JWT", "abc.def".to_owned(), "not a signed JWT"),
        ("no subject", trusted.token(json!({"iss": ISSUER, "aud": resource, "exp": now() + 300})), "required claim"),
    ];
    for (what, token, says) in cases {
        let (status, challenge, session, body) = post(&base, Some(&token), None, initialize()).await;
        assert_eq!(status, 401, "{what}: {body}");
        assert!(session.is_none(), "{what}: no session for a refused token");
        let challenge = challenge.unwrap_or_default();
        assert!(challenge.contains("error=\"invalid_token\"") && challenge.contains(says), "{what}: {challenge}");
        assert!(challenge.contains("resource_metadata=\""), "{what}: {challenge}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_every_call_needs_and_a_session_of_another_principal_are_refused() {
    let tokens = StaticTokens::new()
        .token("t-alice", Principal::new("alice", ["tools.call"]))
        .token("t-bob", Principal::new("bob", ["tools.call"]))
        .token("t-carol", Principal::new("carol", ["tools.read"]));
    let (base, _stop) = serve(|resource| ResourceServer::new(resource, tokens).require_scopes(["tools.call"])).await;
    let (status, challenge, _, _) = post(&base, Some("t-carol"), None, initialize()).await;
    assert_eq!(status, 403);
    let challenge = challenge.unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"tools.call\""),
        "{challenge}"
    );

    let alice = open(&base, "t-alice").await;
    assert_eq!(call_whoami(&base, "t-alice", &alice).await, (200, json!("alice")));
    // Bob's token on Alice's session: refused before the server reads it, and nothing runs.
    let (status, body) = call_whoami(&base, "t-bob", &alice).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.as_str().is_some_and(|t| t.contains("another principal")), "{body}");
    let bob = open(&base, "t-bob").await;
    assert_eq!(call_whoami(&base, "t-bob", &bob).await, (200, json!("bob")));
}

/// Serves `document` (shared, so a test can rotate it) at `/jwks.json`; the URL, and how many times it was fetched.
async fn serve_jwks(document: Arc<Mutex<String>>) -> (String, Arc<Mutex<usize>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    let fetched = Arc::new(Mutex::new(0));
    let count = fetched.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let (document, count) = (document.clone(), count.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |_req: Request<hyper::body::Incoming>| {
                    *count.lock().unwrap() += 1;
                    let body = document.lock().unwrap().clone();
                    async move { Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from(body)))) }
                });
                let _ =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    (url, fetched)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwks_url_is_fetched_once_and_again_for_a_new_key() {
    let first = signer("k1");
    let document = Arc::new(Mutex::new(jwks(&[&first])));
    let (url, fetched) = serve_jwks(document.clone()).await;
    let (base, _stop) = serve(|resource| {
        let verifier = JwtVerifier::from_jwks_url(ISSUER, &resource, url).refetch_interval(Duration::from_secs(2));
        ResourceServer::new(resource, verifier)
    })
    .await;
    let resource = format!("{base}/mcp");
    let token = first.token_for(&resource, "alice", "");
    open(&base, &token).await;
    open(&base, &token).await;
    assert_eq!(*fetched.lock().unwrap(), 1, "the keys are kept");
    // Every token the rest needs is minted now, so that the requests below, which must reach the server within the
    // refetch interval of the second fetch, are all that runs in it, even on a busy machine.
    let second = signer("k2");
    let bob = second.token_for(&resource, "bob", "");
    let strangers = [signer("k3").token_for(&resource, "eve", ""), signer("k4").token_for(&resource, "eve", "")];
    // The authorization server rotates to a new key: the first token naming it makes the server fetch again (once
    // the refetch interval since the last fetch has passed).
    tokio::time::sleep(Duration::from_millis(2100)).await;
    *document.lock().unwrap() = jwks(&[&first, &second]);
    open(&base, &bob).await;
    assert_eq!(*fetched.lock().unwrap(), 2);
    // A key nobody has is not fetched for again at once: no request can make the server hammer its JWKS.
    for stranger in &strangers {
        let (status, ..) = post(&base, Some(stranger.as_str()), None, initialize()).await;
        assert_eq!(status, 401);
    }
    assert_eq!(*fetched.lock().unwrap(), 2, "refetching is rate-limited");
}

const AUDIENCE: &str = "https://mcp.keel.test/mcp";

fn claims(subject: &str, exp: u64) -> Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": subject, "exp": exp})
}

#[tokio::test]
async fn a_cached_jwt_is_refused_once_its_exp_has_passed() {
    let signer = signer("k1");
    let verifier = JwtVerifier::from_jwks_json(ISSUER, AUDIENCE, &jwks(&[&signer])).unwrap().leeway(Duration::ZERO);
    let exp = now() + 1;
    let token = signer.token(claims("alice", exp));
    assert_eq!(verifier.verify(&token).await.unwrap().subject, "alice");
    assert_eq!(verifier.cached(), 1, "a verified token is kept");
    assert_eq!(verifier.verify(&token).await.unwrap().subject, "alice");
    // Past `exp` by the whole second `exp` is counted in, with no leeway.
    while now() <= exp {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let refused = verifier.verify(&token).await.unwrap_err();
    assert_eq!(refused.description(), "the token has expired");
    assert_eq!(verifier.cached(), 0, "the stale entry is dropped, and the refusal not kept");
}

#[tokio::test]
async fn tokens_admitted_only_by_the_leeway_are_not_cached() {
    let signer = signer("k1");
    let verifier = JwtVerifier::from_jwks_json(ISSUER, AUDIENCE, &jwks(&[&signer])).unwrap();
    let past_exp = signer.token(claims("alice", now() - 5));
    assert!(verifier.verify(&past_exp).await.is_ok(), "within the 30 s leeway");
    let early = signer.token(json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "bob", "exp": now() + 300,
        "nbf": now() + 10}));
    assert!(verifier.verify(&early).await.is_ok(), "within the 30 s leeway");
    assert_eq!(verifier.cached(), 0, "neither is valid now without the leeway");
}

#[tokio::test]
async fn tokens_that_do_not_verify_are_never_cached() {
    let (trusted, stranger) = (signer("k1"), signer("k1"));
    let verifier = JwtVerifier::from_jwks_json(ISSUER, AUDIENCE, &jwks(&[&trusted])).unwrap();
    let forged = stranger.token(claims("mallory", now() + 300));
    for _ in 0..2 {
        let refused = verifier.verify(&forged).await.unwrap_err();
        assert_eq!(refused.description(), "the token's signature does not verify");
    }
    // A valid token's claims under a signature that is not its own.
    let valid = trusted.token(claims("alice", now() + 300));
    let forged_signature = format!("{}.{}", valid.rsplit_once('.').unwrap().0, forged.rsplit_once('.').unwrap().1);
    assert!(verifier.verify(&forged_signature).await.is_err());
    assert!(verifier.verify(&trusted.token(claims("alice", now() - 600))).await.is_err());
    assert_eq!(verifier.cached(), 0);
    assert!(verifier.verify(&valid).await.is_ok());
    assert_eq!(verifier.cached(), 1);
    assert!(verifier.verify(&forged_signature).await.is_err(), "the valid token's digest is not the forgery's");
}

#[tokio::test]
async fn the_jwt_cache_holds_at_most_its_capacity() {
    let signer = signer("k1");
    let keys = jwks(&[&signer]);
    let verifier = JwtVerifier::from_jwks_json(ISSUER, AUDIENCE, &keys).unwrap().cache_capacity(2);
    let tokens: Vec<String> = (0..5u64).map(|i| signer.token(claims(&format!("user{i}"), now() + 100 + i))).collect();
    for (i, token) in tokens.iter().enumerate() {
        assert_eq!(verifier.verify(token).await.unwrap().subject, format!("user{i}"));
        assert!(verifier.cached() <= 2);
    }
    assert_eq!(verifier.cached(), 2);
    for (i, token) in tokens.iter().enumerate() {
        assert_eq!(verifier.verify(token).await.unwrap().subject, format!("user{i}"), "evicted ones verify again");
    }
    let none = JwtVerifier::from_jwks_json(ISSUER, AUDIENCE, &keys).unwrap().cache_capacity(0);
    assert!(none.verify(&tokens[0]).await.is_ok());
    assert_eq!(none.cached(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_token_of_a_key_rotated_out_is_refused_after_the_refetch() {
    let (old, new) = (signer("k1"), signer("k2"));
    let document = Arc::new(Mutex::new(jwks(&[&old])));
    let (url, fetched) = serve_jwks(document.clone()).await;
    let verifier = JwtVerifier::from_jwks_url(ISSUER, AUDIENCE, url).refetch_interval(Duration::from_millis(200));
    let token = old.token(claims("alice", now() + 300));
    assert!(verifier.verify(&token).await.is_ok());
    assert_eq!(verifier.cached(), 1);
    // A token naming an unknown key makes the server fetch the same set again: the cache stays.
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(verifier.verify(&signer("k9").token(claims("eve", now() + 300))).await.is_err());
    assert_eq!(*fetched.lock().unwrap(), 2);
    assert_eq!(verifier.cached(), 1, "an unchanged key set keeps the cache");
    // The authorization server drops k1 for k2; the first token naming k2 fetches the new set.
    *document.lock().unwrap() = jwks(&[&new]);
    assert!(verifier.verify(&token).await.is_ok(), "not fetched again yet: still cached");
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(verifier.verify(&new.token(claims("bob", now() + 300))).await.unwrap().subject, "bob");
    assert_eq!(*fetched.lock().unwrap(), 3);
    let refused = verifier.verify(&token).await.unwrap_err();
    assert_eq!(refused.description(), "the token's key is unknown");
}

/// How many times each scoped tool ran.
static RAN: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());

/// The two eras' tests of the scoped tools share [`RAN`]: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Reads a ticket.
#[tool(name = "scoped.read", effect = "read", version = "1.0", scopes = ["tickets.read"])]
async fn scoped_read() -> Result<String, ToolError> {
    RAN.lock().unwrap().push("scoped.read");
    Ok("read".into())
}

/// Changes a ticket.
#[tool(name = "scoped.write", effect = "read", version = "1.0", scopes = ["tickets.read", "tickets.write"])]
async fn scoped_write() -> Result<String, ToolError> {
    RAN.lock().unwrap().push("scoped.write");
    Ok("written".into())
}

/// Says hello to anyone.
#[tool(name = "scoped.open", effect = "read", version = "1.0")]
async fn scoped_open() -> Result<String, ToolError> {
    RAN.lock().unwrap().push("scoped.open");
    Ok("open".into())
}

const SCOPED_TOOLS: [&str; 3] = ["scoped.open", "scoped.read", "scoped.write"];

/// The principals of [`scoped_server`], by token, and the tools each may call.
const SCOPED_PRINCIPALS: [(&str, &[&str]); 3] = [
    ("t-alice", &["scoped.open", "scoped.read", "scoped.write"]),
    ("t-bob", &["scoped.open", "scoped.read"]),
    ("t-carol", &["scoped.open"]),
];

/// A protected server of the three scoped tools, for alice (`tickets.read tickets.write`), bob (`tickets.read`)
/// and carol (no scope): its base URL, and what stops it.
async fn scoped_server() -> (String, CancellationToken) {
    let tokens = StaticTokens::new()
        .token("t-alice", Principal::new("alice", ["tickets.read", "tickets.write"]))
        .token("t-bob", Principal::new("bob", ["tickets.read"]))
        .token("t-carol", Principal::new("carol", Vec::<String>::new()));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let view = Registry::from_inventory().unwrap().view().names(SCOPED_TOOLS).build().unwrap();
    let server = McpServer::new(Executor::new(view).unwrap()).unwrap();
    let protected = ResourceServer::new(format!("{base}/mcp"), tokens);
    let service = server.http_service(HttpConfig::default().auth(protected));
    let stop = CancellationToken::new();
    let shutdown = stop.clone();
    tokio::spawn(async move { service.serve(listener, "/mcp", shutdown).await });
    (base, stop)
}

/// Three principals, three tools: each principal is listed exactly the tools its scopes let it call, every call
/// of a listed tool runs, and every other call is refused `403 insufficient_scope` naming the missing scope and
/// runs nothing: the list and the allowlist agree for every principal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_and_the_allowlist_agree_for_every_principal() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let (base, stop) = scoped_server().await;
    for (token, may_call) in SCOPED_PRINCIPALS {
        let session = open(&base, token).await;
        let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
        let (status, _, _, body) = post(&base, Some(token), Some(&session), list).await;
        assert_eq!(status, 200, "{token}: {body}");
        let listed: Vec<&str> =
            body["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(listed, may_call, "{token}: the list");
        for tool in SCOPED_TOOLS {
            RAN.lock().unwrap().clear();
            let call =
                json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": tool, "arguments": {}}});
            let (status, challenge, _, body) = post(&base, Some(token), Some(&session), call).await;
            if may_call.contains(&tool) {
                assert_eq!(status, 200, "{token} {tool}: {body}");
                assert_eq!(body["result"]["isError"], false, "{token} {tool}: {body}");
                assert_eq!(*RAN.lock().unwrap(), [tool], "{token} {tool}");
            } else {
                assert_eq!(status, 403, "{token} {tool}: {body}");
                let challenge = challenge.unwrap_or_default();
                assert!(challenge.contains("error=\"insufficient_scope\""), "{token} {tool}: {challenge}");
                let missing = if tool == "scoped.write" && token == "t-bob" { "tickets.write" } else { "tickets.read" };
                assert!(challenge.contains(missing), "{token} {tool}: {challenge}");
                assert!(RAN.lock().unwrap().is_empty(), "{token} {tool}: nothing runs");
            }
        }
    }
    stop.cancel();
}

/// The same in the stateless era, where the server takes the called tool from the `Mcp-Name` header: each
/// principal is listed exactly what it may call, every other call is refused `403 insufficient_scope` and runs
/// nothing; and a request whose `Mcp-Name` names a tool the caller may call while its body calls one it may not
/// never runs the tool it calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_the_stateless_era_too_and_a_lying_tool_header_runs_nothing() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let (base, stop) = scoped_server().await;
    let url = format!("{base}/mcp");
    for (token, may_call) in SCOPED_PRINCIPALS {
        let peer = common::Peer::new(&url, Some(token), common::Era::Stateless);
        assert_eq!(peer.list(1).await, may_call, "{token}: the list");
        for tool in SCOPED_TOOLS {
            RAN.lock().unwrap().clear();
            let reply = peer.call(2, tool, json!({})).await;
            if may_call.contains(&tool) {
                assert_eq!((reply.status, &reply.body["result"]["isError"]), (200, &json!(false)), "{reply:?}");
                assert_eq!(*RAN.lock().unwrap(), [tool], "{token} {tool}");
            } else {
                assert_eq!(reply.status, 403, "{token} {tool}: {reply:?}");
                assert!(RAN.lock().unwrap().is_empty(), "{token} {tool}: nothing runs");
            }
        }
    }
    // bob may call scoped.read, not scoped.write: a header that names the first over a body that calls the second.
    RAN.lock().unwrap().clear();
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "scoped.write",
        "arguments": {}, "_meta": {"io.modelcontextprotocol/protocolVersion": common::STATELESS_REVISION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "keel-test", "version": "1"}}}});
    let response = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", common::STATELESS_REVISION)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "scoped.read")
        .header("authorization", "Bearer t-bob")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    assert!(RAN.lock().unwrap().is_empty(), "nothing runs: {status} {text}");
    assert!(!text.contains("written"), "{status} {text}");
    stop.cancel();
}

/// A JWKS endpoint on loopback that a test steers: the document it serves at `/jwks.json` (with the
/// `Cache-Control` it is given, after `delay`), a redirect to it at `/moved`, the document padded with whitespace
/// past 1 MiB at `/big`; and how many requests each path got.
#[derive(Clone, Default)]
struct JwksServer {
    document: Arc<Mutex<String>>,
    cache_control: Arc<Mutex<Option<String>>>,
    delay: Duration,
    hits: Arc<Mutex<std::collections::HashMap<String, usize>>>,
}

impl JwksServer {
    fn new(document: String, cache_control: Option<&str>, delay: Duration) -> JwksServer {
        JwksServer {
            document: Arc::new(Mutex::new(document)),
            cache_control: Arc::new(Mutex::new(cache_control.map(str::to_owned))),
            delay,
            hits: Arc::default(),
        }
    }

    /// Requests to `path` so far.
    fn hits(&self, path: &str) -> usize {
        self.hits.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    async fn answer(&self, path: String) -> Response<Full<Bytes>> {
        *self.hits.lock().unwrap().entry(path.clone()).or_insert(0) += 1;
        tokio::time::sleep(self.delay).await;
        let document = self.document.lock().unwrap().clone();
        let mut response = match path.as_str() {
            "/jwks.json" => Response::new(Full::new(Bytes::from(document))),
            "/big" => Response::new(Full::new(Bytes::from(format!("{document}{}", " ".repeat(1 << 20))))),
            "/moved" => {
                let mut r = Response::new(Full::new(Bytes::new()));
                *r.status_mut() = hyper::StatusCode::FOUND;
                r.headers_mut().insert("location", hyper::header::HeaderValue::from_static("/jwks.json"));
                r
            }
            _ => {
                let mut r = Response::new(Full::new(Bytes::new()));
                *r.status_mut() = hyper::StatusCode::NOT_FOUND;
                r
            }
        };
        if let Some(value) = self.cache_control.lock().unwrap().clone() {
            response.headers_mut().insert("cache-control", value.parse().unwrap());
        }
        response
    }

    /// Serves on a free loopback port; the base URL.
    async fn serve(&self) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = self.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let server = server.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                        let server = server.clone();
                        async move { Ok::<_, std::convert::Infallible>(server.answer(req.uri().path().to_owned()).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        base
    }
}

/// The authorization server drops a compromised `k1` and keeps `k2`, its JWKS saying `max-age=1`: once that second
/// has passed, the next token makes the server fetch the set again, and from then on `k1`'s tokens are refused (the
/// one cached before too, and a new one) while `k2`'s are still accepted; no token naming an unknown key was needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_dropped_from_the_jwks_is_refused_once_the_sets_max_age_has_passed() {
    let (k1, k2) = (signer("k1"), signer("k2"));
    let jwks_server = JwksServer::new(jwks(&[&k1, &k2]), Some("public, max-age=1"), Duration::ZERO);
    let url = format!("{}/jwks.json", jwks_server.serve().await);
    let verifier = JwtVerifier::from_jwks_url(ISSUER, AUDIENCE, url).refetch_interval(Duration::from_millis(200));
    let (old, other) = (k1.token(claims("alice", now() + 300)), k2.token(claims("bob", now() + 300)));
    assert_eq!(verifier.verify(&old).await.unwrap().subject, "alice");
    let fetched_at = std::time::Instant::now();
    assert_eq!(verifier.verify(&other).await.unwrap().subject, "bob");
    assert_eq!(jwks_server.hits("/jwks.json"), 1);
    assert_eq!(verifier.cached(), 2);

    *jwks_server.document.lock().unwrap() = jwks(&[&k2]);
    // Wait out the set's max-age, as the authorization server said it.
    while fetched_at.elapsed() <= Duration::from_millis(1100) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let refused = verifier.verify(&old).await.expect_err("k1 is gone from the set");
    assert_eq!(refused.description(), "the token's key is unknown");
    assert_eq!(jwks_server.hits("/jwks.json"), 2, "the expired set was fetched again, once");
    let fresh = k1.token(claims("mallory", now() + 300));
    assert_eq!(verifier.verify(&fresh).await.unwrap_err().description(), "the token's key is unknown");
    assert_eq!(verifier.verify(&other).await.unwrap().subject, "bob", "k2 is still in the set");
    assert_eq!(verifier.verify(&k2.token(claims("carol", now() + 300))).await.unwrap().subject, "carol");
    assert_eq!(jwks_server.hits("/jwks.json"), 2);
}

/// Fifty tokens at once, each naming a key nobody has: the JWKS is fetched once (they wait for that one fetch), and
/// once more for fifty more after the refetch interval; never once per token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_naming_unknown_keys_at_once_fetch_the_jwks_once() {
    let k1 = signer("k1");
    let jwks_server = JwksServer::new(jwks(&[&k1]), None, Duration::from_millis(100));
    let url = format!("{}/jwks.json", jwks_server.serve().await);
    let verifier =
        Arc::new(JwtVerifier::from_jwks_url(ISSUER, AUDIENCE, url).refetch_interval(Duration::from_millis(300)));
    let strangers: Vec<Signer> = (0..50).map(|i| signer(&format!("unknown-{i}"))).collect();
    for round in 0..2 {
        let mut checks = tokio::task::JoinSet::new();
        for stranger in &strangers {
            let (verifier, token) = (verifier.clone(), stranger.token(claims("eve", now() + 300)));
            checks.spawn(async move { verifier.verify(&token).await.map(|p| p.subject.clone()) });
        }
        while let Some(result) = checks.join_next().await {
            assert!(result.unwrap().is_err(), "round {round}: an unknown key is refused");
        }
        assert!(
            jwks_server.hits("/jwks.json") <= round + 1,
            "round {round}: {} fetches",
            jwks_server.hits("/jwks.json")
        );
        tokio::time::sleep(Duration::from_millis(350)).await;
    }
    assert!(verifier.verify(&k1.token(claims("alice", now() + 300))).await.is_ok());
    assert!(jwks_server.hits("/jwks.json") <= 3, "{} fetches", jwks_server.hits("/jwks.json"));
}

/// A JWKS URL that answers with a redirect is not followed: the token cannot be checked, and the redirect's
/// target is never asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwks_url_that_redirects_is_refused() {
    let k1 = signer("k1");
    let jwks_server = JwksServer::new(jwks(&[&k1]), None, Duration::ZERO);
    let url = format!("{}/moved", jwks_server.serve().await);
    let verifier = JwtVerifier::from_jwks_url(ISSUER, AUDIENCE, url);
    let refused = verifier.verify(&k1.token(claims("alice", now() + 300))).await.expect_err("a redirect is refused");
    assert_eq!(refused.description(), "the token's key cannot be checked now");
    assert_eq!(jwks_server.hits("/moved"), 1);
    assert_eq!(jwks_server.hits("/jwks.json"), 0, "the redirect was not followed");
}

/// A JWKS body past the cap (here a valid set padded with 1 MiB of whitespace) is refused, not read whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_jwks_is_refused() {
    let k1 = signer("k1");
    let jwks_server = JwksServer::new(jwks(&[&k1]), None, Duration::ZERO);
    let url = format!("{}/big", jwks_server.serve().await);
    let verifier = JwtVerifier::from_jwks_url(ISSUER, AUDIENCE, url);
    let refused = verifier.verify(&k1.token(claims("alice", now() + 300))).await.expect_err("too large a set");
    assert_eq!(refused.description(), "the token's key cannot be checked now");
}
