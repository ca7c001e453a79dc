//! OAuth 2.0 token introspection (RFC 7662): the [`TokenVerifier`] for opaque access tokens, which only the
//! authorization server that issued them can read. See [`IntrospectionVerifier`].

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use super::token_cache::{TokenCache, TokenKey};
use super::{AuthConfigError, Principal, TokenError, TokenVerifier, VerifyFuture};

/// The default number of verified tokens an [`IntrospectionVerifier`] keeps.
pub const DEFAULT_INTROSPECTION_CACHE_CAPACITY: usize = 10_000;
/// The default longest time an [`IntrospectionVerifier`] keeps a verified token before asking again.
pub const DEFAULT_INTROSPECTION_CACHE_TTL: Duration = Duration::from_secs(60);
/// The default time an introspection request may take.
pub const DEFAULT_INTROSPECTION_TIMEOUT: Duration = Duration::from_secs(10);
/// The most introspection requests an [`IntrospectionVerifier`] has in flight at once, by default.
pub const DEFAULT_INTROSPECTION_CONCURRENCY: usize = 32;
/// The default time an [`IntrospectionVerifier`] keeps a token the endpoint refused before asking about it again.
pub const DEFAULT_INTROSPECTION_REFUSAL_TTL: Duration = Duration::from_secs(10);
/// The most tokens from one client address an [`IntrospectionVerifier`] checks at once, by default.
pub const DEFAULT_INTROSPECTION_TOKENS_PER_CLIENT: usize = 8;
/// The largest introspection response read; a larger one counts as a failure of the endpoint.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// How an [`IntrospectionVerifier`] authenticates as a client to the introspection endpoint with a client id and
/// secret (RFC 6749 §2.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ClientAuthMethod {
    /// `client_secret_basic`: an `Authorization: Basic` header of the form-urlencoded id and secret (the default).
    #[default]
    ClientSecretBasic,
    /// `client_secret_post`: `client_id` and `client_secret` in the form body.
    ClientSecretPost,
}

/// The credential sent with each introspection request.
#[derive(Clone)]
enum ClientAuth {
    None,
    Secret { id: String, secret: String },
    Bearer(String),
}

/// Opaque access tokens checked by asking the authorization server (OAuth 2.0 token introspection, RFC 7662).
///
/// Each token is POSTed to the introspection endpoint as `token=...&token_type_hint=access_token`
/// (`application/x-www-form-urlencoded`), with this resource server's client credentials
/// ([`client_credentials`](IntrospectionVerifier::client_credentials), `client_secret_basic` by default, or
/// [`bearer_credential`](IntrospectionVerifier::bearer_credential)). The answer must say:
///
/// - `active: true`;
/// - `exp` (when present) not past and `nbf` (when present) not ahead, each with a small leeway
///   ([`leeway`](IntrospectionVerifier::leeway), 30 s by default). `exp` is optional in RFC 7662: the endpoint's
///   `active` is the authority, and a token without `exp` is kept in the cache for the TTL only;
/// - `aud` (a string or an array) naming this server's resource URI (RFC 8707). By default an answer without
///   `aud` is refused too; [`require_audience(false)`](IntrospectionVerifier::require_audience) accepts it (for an
///   authorization server that does not say), while an `aud` that does not name the resource is always refused;
/// - `iss` equal to the expected issuer, when one is set ([`issuer`](IntrospectionVerifier::issuer));
/// - `sub`, the principal's subject. `username` is not a fallback by default: it is a name for people, which the
///   authorization server may let change or reuse, and a session belongs to its subject.
///   [`username_as_subject`](IntrospectionVerifier::username_as_subject) allows it for a server that never sends
///   `sub`.
///
/// `scope` (space-separated) becomes the principal's scopes, `client_id` its client, `iss` its issuer.
///
/// **Failures.** When the endpoint cannot be reached, answers other than `200`, or sends something that is not an
/// introspection response, the token is refused with "the token cannot be checked now" and the cause is logged
/// (`tracing`, at `warn`); an inactive token is refused with "the token is not active" (logged at `debug`). Either
/// way the client gets the standard `401` with `error="invalid_token"`. Nothing panics.
///
/// **Cache.** A token that verified is kept until the earlier of its `exp` and
/// [`cache_ttl`](IntrospectionVerifier::cache_ttl) (60 s by default) from now, so that its next requests do not ask
/// the endpoint again; a token revoked at the authorization server is thus still accepted here for at most the
/// TTL. The cache is keyed by a keyed 128-bit digest of the token (SipHash-2-4 under a key drawn at random for each
/// verifier), never the token itself, and holds at most
/// [`cache_capacity`](IntrospectionVerifier::cache_capacity) entries (10 000 by default; when full, expired
/// entries are dropped, then the one that expires first). A token the endpoint refused (inactive, expired, for
/// another resource or issuer, without a subject; not one merely not valid yet, nor one it could not be asked
/// about) is kept as refused for [`refusal_ttl`](IntrospectionVerifier::refusal_ttl) (10 s by default), by the
/// same keyed digest, at most as many as the cache's capacity: a refused token sent again is refused without
/// asking.
///
/// **Under a flood.** Every token neither cached nor kept as refused costs one request to the endpoint. At most
/// [`max_concurrent`](IntrospectionVerifier::max_concurrent) (32) are in flight; the others wait for a permit in
/// the order they came, each within the [`timeout`](IntrospectionVerifier::timeout) (10 s), then are refused as
/// not checkable now. Of the tokens from one client address (as the server passes it,
/// [`TokenVerifier::verify_from`]), at most
/// [`max_concurrent_per_client`](IntrospectionVerifier::max_concurrent_per_client) (8) different ones are being
/// checked at once; one more is refused at once (`401`, "too many of this client's tokens are being checked
/// now"), without asking the endpoint or waiting for a permit. So a flood of made-up tokens from one address
/// holds at most that many places in the queue, and a valid token from another address waits behind at most
/// those places of each flooding address, not behind the whole flood. A flood spread over many addresses can
/// still fill the queue: each address then holds its share, and tokens past the timeout are refused as not
/// checkable now, never admitted. Without an address (`verify`) only the global cap applies.
///
/// **Transport.** Redirects are not followed (the request carries credentials). With the `rustls` feature an
/// `https://` endpoint is trusted by webpki-roots' Mozilla roots plus
/// [`add_root_certificate`](IntrospectionVerifier::add_root_certificate); without it only `http://` works. An
/// `http://` endpoint sends the token and the credentials in clear: use it on loopback or a private link only.
pub struct IntrospectionVerifier {
    endpoint: reqwest::Url,
    resource: String,
    issuer: Option<String>,
    require_audience: bool,
    username_as_subject: bool,
    auth: ClientAuth,
    auth_method: ClientAuthMethod,
    leeway: Duration,
    timeout: Duration,
    ttl: Duration,
    #[cfg_attr(not(feature = "rustls"), allow(dead_code))]
    roots: Vec<Vec<u8>>,
    client: reqwest::Client,
    cache: TokenCache,
    /// One permit per introspection request in flight.
    in_flight: Arc<tokio::sync::Semaphore>,
    max_in_flight: usize,
    refusal_ttl: Duration,
    /// The tokens of each client address being checked now, each with how many requests are checking it.
    clients: Arc<Mutex<HashMap<IpAddr, HashMap<TokenKey, usize>>>>,
    per_client: usize,
}

/// A client's place among the tokens being checked, given back when dropped.
struct ClientSlot {
    clients: Arc<Mutex<HashMap<IpAddr, HashMap<TokenKey, usize>>>>,
    client: IpAddr,
    key: TokenKey,
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(tokens) = clients.get_mut(&self.client) {
            if let Some(n) = tokens.get_mut(&self.key) {
                *n -= 1;
                if *n == 0 {
                    tokens.remove(&self.key);
                }
            }
            if tokens.is_empty() {
                clients.remove(&self.client);
            }
        }
    }
}

impl fmt::Debug for IntrospectionVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let auth = match &self.auth {
            ClientAuth::None => "none".to_owned(),
            ClientAuth::Secret { id, .. } => format!("{:?} as {id}", self.auth_method),
            ClientAuth::Bearer(_) => "bearer".to_owned(),
        };
        f.debug_struct("IntrospectionVerifier")
            .field("endpoint", &self.endpoint.as_str())
            .field("resource", &self.resource)
            .field("issuer", &self.issuer)
            .field("client_auth", &auth)
            .field("cache_ttl", &self.ttl)
            .field("cache_capacity", &self.cache.capacity())
            .field("max_concurrent", &self.max_in_flight)
            .field("max_concurrent_per_client", &self.per_client)
            .field("refusal_ttl", &self.refusal_ttl)
            .finish_non_exhaustive()
    }
}

impl IntrospectionVerifier {
    /// Tokens checked at the introspection endpoint `endpoint` (an `http://` or `https://` URL), for `resource`
    /// (this server's resource URI, the audience its tokens must name). No client credentials until
    /// [`client_credentials`](IntrospectionVerifier::client_credentials) or
    /// [`bearer_credential`](IntrospectionVerifier::bearer_credential) sets them; most authorization servers
    /// require them.
    ///
    /// # Errors
    ///
    /// When `endpoint` is not an `http://` or `https://` URL, is `https://` without the `rustls` feature, or the
    /// HTTP client cannot be built.
    pub fn new(endpoint: &str, resource: impl Into<String>) -> Result<IntrospectionVerifier, AuthConfigError> {
        let endpoint = reqwest::Url::parse(endpoint).map_err(|e| {
            AuthConfigError::caused_by(format!("the introspection endpoint {endpoint:?} is not a URL: {e}"), e)
        })?;
        match endpoint.scheme() {
            "http" => {}
            "https" if cfg!(feature = "rustls") => {}
            "https" => {
                return Err(AuthConfigError::new(format!(
                    "the introspection endpoint {endpoint} needs HTTPS; enable keel-tools-mcp's `rustls` feature"
                )));
            }
            other => {
                return Err(AuthConfigError::new(format!(
                    "the introspection endpoint {endpoint} is not http:// or https:// ({other})"
                )));
            }
        }
        if !endpoint.username().is_empty() || endpoint.password().is_some() {
            return Err(AuthConfigError::new(
                "the introspection endpoint's URL holds credentials; give them to client_credentials",
            ));
        }
        Ok(IntrospectionVerifier {
            endpoint,
            resource: resource.into(),
            issuer: None,
            require_audience: true,
            username_as_subject: false,
            auth: ClientAuth::None,
            auth_method: ClientAuthMethod::default(),
            leeway: Duration::from_secs(30),
            timeout: DEFAULT_INTROSPECTION_TIMEOUT,
            ttl: DEFAULT_INTROSPECTION_CACHE_TTL,
            roots: Vec::new(),
            client: build_client(&[])?,
            cache: TokenCache::new(DEFAULT_INTROSPECTION_CACHE_CAPACITY),
            in_flight: Arc::new(tokio::sync::Semaphore::new(DEFAULT_INTROSPECTION_CONCURRENCY)),
            max_in_flight: DEFAULT_INTROSPECTION_CONCURRENCY,
            refusal_ttl: DEFAULT_INTROSPECTION_REFUSAL_TTL,
            clients: Arc::default(),
            per_client: DEFAULT_INTROSPECTION_TOKENS_PER_CLIENT,
        })
    }

    /// Authenticates to the endpoint as client `client_id` with `client_secret`, by `client_secret_basic` unless
    /// [`client_auth_method`](IntrospectionVerifier::client_auth_method) says otherwise. Replaces a
    /// [`bearer_credential`](IntrospectionVerifier::bearer_credential).
    #[must_use]
    pub fn client_credentials(
        mut self,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
    ) -> IntrospectionVerifier {
        self.auth = ClientAuth::Secret { id: client_id.into(), secret: client_secret.into() };
        self
    }

    /// How the client id and secret are sent (default [`ClientAuthMethod::ClientSecretBasic`]); it applies to the
    /// credentials of [`client_credentials`](IntrospectionVerifier::client_credentials), before or after this call.
    #[must_use]
    pub fn client_auth_method(mut self, method: ClientAuthMethod) -> IntrospectionVerifier {
        self.auth_method = method;
        self
    }

    /// Authenticates to the endpoint with `Authorization: Bearer credential` (an authorization server that
    /// protects its introspection endpoint with a token of its own). Replaces client credentials.
    #[must_use]
    pub fn bearer_credential(mut self, credential: impl Into<String>) -> IntrospectionVerifier {
        self.auth = ClientAuth::Bearer(credential.into());
        self
    }

    /// The issuer every answer's `iss` must be; without it, `iss` is not checked (it is still the principal's
    /// issuer when the answer has one).
    #[must_use]
    pub fn issuer(mut self, issuer: impl Into<String>) -> IntrospectionVerifier {
        self.issuer = Some(issuer.into());
        self
    }

    /// Whether an answer must carry `aud` (default `true`). An `aud` that does not name the resource is refused
    /// either way.
    #[must_use]
    pub fn require_audience(mut self, required: bool) -> IntrospectionVerifier {
        self.require_audience = required;
        self
    }

    /// Takes `username` as the subject of an answer without `sub` (default: such an answer is refused).
    #[must_use]
    pub fn username_as_subject(mut self, allowed: bool) -> IntrospectionVerifier {
        self.username_as_subject = allowed;
        self
    }

    /// The clock skew allowed on `exp` and `nbf` (default 30 s).
    #[must_use]
    pub fn leeway(mut self, leeway: Duration) -> IntrospectionVerifier {
        self.leeway = leeway;
        self
    }

    /// The longest an introspection request may take, connecting included (default
    /// [`DEFAULT_INTROSPECTION_TIMEOUT`]); past it the token is refused as not checkable now.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> IntrospectionVerifier {
        self.timeout = timeout;
        self
    }

    /// The longest a verified token is kept without asking the endpoint again (default
    /// [`DEFAULT_INTROSPECTION_CACHE_TTL`]); never past its `exp`. `Duration::ZERO` asks on every request.
    #[must_use]
    pub fn cache_ttl(mut self, ttl: Duration) -> IntrospectionVerifier {
        self.ttl = ttl;
        self
    }

    /// The most verified tokens kept at once (default [`DEFAULT_INTROSPECTION_CACHE_CAPACITY`]); `0` keeps none.
    #[must_use]
    pub fn cache_capacity(mut self, capacity: usize) -> IntrospectionVerifier {
        self.cache = TokenCache::new(capacity);
        self
    }

    /// Trusts the CA certificate(s) in `pem` (PEM text, one or more `CERTIFICATE` blocks) for an `https://`
    /// endpoint, in addition to the built-in Mozilla roots: for an authorization server whose certificate a private
    /// CA signed. Feature `rustls`.
    ///
    /// # Errors
    ///
    /// When `pem` holds no certificate, or one that cannot be a root.
    #[cfg(feature = "rustls")]
    pub fn add_root_certificate(mut self, pem: impl AsRef<[u8]>) -> Result<IntrospectionVerifier, AuthConfigError> {
        self.roots.push(pem.as_ref().to_vec());
        self.client = build_client(&self.roots)?;
        Ok(self)
    }

    /// The most introspection requests in flight at once (default [`DEFAULT_INTROSPECTION_CONCURRENCY`]; at least
    /// one). A token that finds them all taken waits for one within the [`timeout`](IntrospectionVerifier::timeout),
    /// then is refused as not checkable now: a flood of new tokens (each one uncached) cannot turn this server into
    /// a flood of requests to the authorization server.
    #[must_use]
    pub fn max_concurrent(mut self, max: usize) -> IntrospectionVerifier {
        self.max_in_flight = max.max(1);
        self.in_flight = Arc::new(tokio::sync::Semaphore::new(self.max_in_flight));
        self
    }

    /// The most different tokens from one client address checked at once (default
    /// [`DEFAULT_INTROSPECTION_TOKENS_PER_CLIENT`]; at least one): one more is refused at once, without asking the
    /// endpoint. Requests with a token already being checked for that client do not count again. It applies when
    /// the server passes the client's address ([`TokenVerifier::verify_from`]).
    #[must_use]
    pub fn max_concurrent_per_client(mut self, max: usize) -> IntrospectionVerifier {
        self.per_client = max.max(1);
        self
    }

    /// How long a token the endpoint refused is refused again without asking (default
    /// [`DEFAULT_INTROSPECTION_REFUSAL_TTL`]); `Duration::ZERO` asks every time.
    #[must_use]
    pub fn refusal_ttl(mut self, ttl: Duration) -> IntrospectionVerifier {
        self.refusal_ttl = ttl;
        self
    }

    /// Verified tokens in the cache now (expired ones included until they are dropped).
    pub fn cached(&self) -> usize {
        self.cache.len()
    }

    /// Refused tokens kept now (stale ones included until they are dropped).
    pub fn refused(&self) -> usize {
        self.cache.refusals()
    }

    /// A place for checking the token `key` for `client`, unless that client has as many other tokens being
    /// checked as it may.
    fn client_slot(&self, client: IpAddr, key: TokenKey) -> Option<ClientSlot> {
        let client = client.to_canonical();
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        let tokens = clients.entry(client).or_default();
        if !tokens.contains_key(&key) && tokens.len() >= self.per_client {
            return None;
        }
        *tokens.entry(key).or_insert(0) += 1;
        Some(ClientSlot { clients: self.clients.clone(), client, key })
    }

    /// Asks the endpoint about `token`: its answer, or why there is none.
    async fn introspect(&self, token: &str) -> Result<Introspection, String> {
        let started = tokio::time::Instant::now();
        let _permit = match tokio::time::timeout(self.timeout, self.in_flight.acquire()).await {
            Ok(Ok(permit)) => permit,
            _ => return Err(format!("{} introspection requests are in flight already", self.max_in_flight)),
        };
        let timeout = self.timeout.saturating_sub(started.elapsed());
        let mut body = format!("token={}&token_type_hint=access_token", form_encode(token));
        let mut request = self
            .client
            .post(self.endpoint.clone())
            .timeout(timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(reqwest::header::ACCEPT, "application/json");
        match &self.auth {
            ClientAuth::None => {}
            ClientAuth::Secret { id, secret } => match self.auth_method {
                ClientAuthMethod::ClientSecretBasic => {
                    request = request.basic_auth(form_encode(id), Some(form_encode(secret)));
                }
                ClientAuthMethod::ClientSecretPost => {
                    body.push_str(&format!("&client_id={}&client_secret={}", form_encode(id), form_encode(secret)));
                }
            },
            ClientAuth::Bearer(credential) => request = request.bearer_auth(credential),
        }
        let mut response = request.body(body).send().await.map_err(|e| describe(&e))?;
        let status = response.status();
        if status != reqwest::StatusCode::OK {
            return Err(format!("the endpoint answered {status}"));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| describe(&e))? {
            if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(format!("the answer is larger than {MAX_RESPONSE_BYTES} bytes"));
            }
            bytes.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&bytes).map_err(|e| format!("the answer is not an introspection response: {e}"))
    }

    /// The principal of an answer, how long it may be cached and (when the answer has `exp`) the wall-clock time
    /// past which it may not; or why the token is refused.
    fn admit(&self, answer: Introspection) -> Result<(Principal, Duration, Option<SystemTime>), TokenError> {
        if !answer.active {
            return Err(TokenError::new("the token is not active"));
        }
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        let leeway = self.leeway.as_secs_f64();
        if answer.exp.is_some_and(|exp| exp + leeway <= now) {
            return Err(TokenError::new("the token has expired"));
        }
        if answer.nbf.is_some_and(|nbf| nbf - leeway > now) {
            return Err(TokenError::new("the token is not valid yet"));
        }
        match &answer.aud {
            Some(aud) if !aud.names(&self.resource) => {
                return Err(TokenError::new("the token is for another resource"));
            }
            None if self.require_audience => return Err(TokenError::new("the token names no audience")),
            _ => {}
        }
        if let Some(issuer) = &self.issuer
            && answer.iss.as_deref() != Some(issuer.as_str())
        {
            return Err(TokenError::new("the token is from another issuer"));
        }
        let subject = match (answer.sub, answer.username) {
            (Some(sub), _) if !sub.is_empty() => sub,
            (_, Some(username)) if self.username_as_subject && !username.is_empty() => username,
            _ => return Err(TokenError::new("the token has no subject")),
        };
        // Kept until the earlier of `exp` and the TTL; a token past its `exp` (admitted within the leeway) is not
        // kept at all.
        let keep = match answer.exp {
            Some(exp) if exp <= now => Duration::ZERO,
            Some(exp) => self.ttl.min(Duration::try_from_secs_f64(exp - now).unwrap_or(Duration::ZERO)),
            None => self.ttl,
        };
        let not_after = answer.exp.and_then(|exp| UNIX_EPOCH.checked_add(Duration::try_from_secs_f64(exp).ok()?));
        let scopes = answer.scope.as_deref().unwrap_or_default().split_whitespace().map(str::to_owned).collect();
        let principal = Principal { subject, client_id: answer.client_id, scopes, issuer: answer.iss };
        Ok((principal, keep, not_after))
    }
}

impl TokenVerifier for IntrospectionVerifier {
    fn verify<'a>(&'a self, token: &'a str) -> VerifyFuture<'a> {
        self.verify_from(token, None)
    }

    fn verify_from<'a>(&'a self, token: &'a str, client: Option<IpAddr>) -> VerifyFuture<'a> {
        Box::pin(async move {
            let key = self.cache.key(token);
            if let Some(principal) = self.cache.lookup(&key) {
                return Ok(principal);
            }
            if let Some(refusal) = self.cache.lookup_refusal(&key) {
                return Err(refusal);
            }
            let _slot = match client {
                Some(client) => match self.client_slot(client, key) {
                    Some(slot) => Some(slot),
                    None => {
                        tracing::debug!(%client, "a client has too many tokens being checked; one more is refused");
                        return Err(TokenError::new("too many of this client's tokens are being checked now"));
                    }
                },
                None => None,
            };
            let generation = self.cache.generation();
            let answer = match self.introspect(token).await {
                Ok(answer) => answer,
                Err(cause) => {
                    tracing::warn!(endpoint = %self.endpoint, error = %cause, "token introspection failed");
                    return Err(TokenError::new("the token cannot be checked now"));
                }
            };
            // A token not valid yet may be soon: its refusal is not kept.
            let premature = answer.active && answer.nbf.is_some_and(|nbf| nbf - self.leeway.as_secs_f64() > now());
            match self.admit(answer) {
                Ok((principal, keep, not_after)) => {
                    let principal = Arc::new(principal);
                    self.cache.remember(generation, key, &principal, keep, not_after);
                    Ok(principal)
                }
                Err(refusal) => {
                    tracing::debug!(endpoint = %self.endpoint, reason = %refusal, "introspection refused a token");
                    if !premature {
                        self.cache.remember_refusal(key, &refusal, self.refusal_ttl);
                    }
                    Err(refusal)
                }
            }
        })
    }
}

/// The wall-clock time in seconds since the Unix epoch.
fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// What keel reads of an introspection response (RFC 7662 §2.2). `active` is required; every other member is
/// optional, and members keel does not read are ignored.
#[derive(Deserialize)]
struct Introspection {
    active: bool,
    scope: Option<String>,
    client_id: Option<String>,
    username: Option<String>,
    exp: Option<f64>,
    nbf: Option<f64>,
    sub: Option<String>,
    aud: Option<Audience>,
    iss: Option<String>,
}

/// `aud`: one string or an array of them.
#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Audience {
    fn names(&self, resource: &str) -> bool {
        match self {
            Audience::One(aud) => aud == resource,
            Audience::Many(auds) => auds.iter().any(|aud| aud == resource),
        }
    }
}

/// `text` as `application/x-www-form-urlencoded` encodes it (the WHATWG URL standard's byte serializer).
fn form_encode(text: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => out.push(char::from(byte)),
            b' ' => out.push('+'),
            _ => {
                let _ = write!(out, "%{byte:02X}");
            }
        }
    }
    out
}

/// A transport error with its causes, one line (reqwest's own text names only the outermost).
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The HTTP client of the introspection requests: no redirects, and (feature `rustls`) a TLS configuration of
/// its own with webpki-roots' Mozilla roots and `extra` (PEM).
fn build_client(extra: &[Vec<u8>]) -> Result<reqwest::Client, AuthConfigError> {
    let builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(30));
    #[cfg(feature = "rustls")]
    let builder = builder.tls_backend_preconfigured(tls_config(extra)?);
    #[cfg(not(feature = "rustls"))]
    let _ = extra;
    builder
        .build()
        .map_err(|e| AuthConfigError::caused_by(format!("cannot build the introspection client: {}", describe(&e)), e))
}

#[cfg(feature = "rustls")]
fn tls_config(extra: &[Vec<u8>]) -> Result<rustls::ClientConfig, AuthConfigError> {
    keel_tools_tls::client_config(extra).map_err(|e| AuthConfigError::caused_by(e.to_string(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verifier() -> IntrospectionVerifier {
        IntrospectionVerifier::new("http://127.0.0.1:9/introspect", "https://mcp.example.com/mcp").unwrap()
    }

    fn answer(json: serde_json::Value) -> Introspection {
        serde_json::from_value(json).unwrap()
    }

    fn now() -> f64 {
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
    }

    #[test]
    fn form_encoding() {
        assert_eq!(form_encode("a b+c/=&é~"), "a+b%2Bc%2F%3D%26%C3%A9%7E");
        assert_eq!(form_encode("Az09*-._"), "Az09*-._");
    }

    #[test]
    fn endpoints_that_are_not_http_urls_are_refused() {
        assert!(IntrospectionVerifier::new("not a url", "r").is_err());
        assert!(IntrospectionVerifier::new("ftp://h/introspect", "r").is_err());
        assert!(IntrospectionVerifier::new("http://id:secret@h/introspect", "r").is_err());
        assert_eq!(
            IntrospectionVerifier::new("https://h/introspect", "r").is_ok(),
            cfg!(feature = "rustls"),
            "https:// needs the rustls feature"
        );
    }

    #[test]
    fn what_an_answer_must_say() {
        let v = verifier();
        let aud = "https://mcp.example.com/mcp";
        let ok = answer(serde_json::json!({"active": true, "sub": "alice", "aud": [aud, "other"],
            "scope": "a b", "client_id": "c", "iss": "https://as", "exp": now() + 600.0}));
        let (principal, keep, _) = v.admit(ok).unwrap();
        assert_eq!(principal.subject, "alice");
        assert_eq!(principal.scopes, ["a", "b"]);
        assert_eq!(principal.client_id.as_deref(), Some("c"));
        assert_eq!(principal.issuer.as_deref(), Some("https://as"));
        assert_eq!(keep, DEFAULT_INTROSPECTION_CACHE_TTL, "the TTL, sooner than exp");
        let soon = answer(serde_json::json!({"active": true, "sub": "a", "aud": aud, "exp": now() + 5.0}));
        assert!(v.admit(soon).unwrap().1 <= Duration::from_secs(5), "exp, sooner than the TTL");
        let within_leeway = answer(serde_json::json!({"active": true, "sub": "a", "aud": aud, "exp": now() - 5.0}));
        assert_eq!(v.admit(within_leeway).unwrap().1, Duration::ZERO, "admitted, not cached");

        let refused = |v: &IntrospectionVerifier, json: serde_json::Value| {
            v.admit(answer(json)).unwrap_err().description().to_owned()
        };
        assert_eq!(
            refused(&v, serde_json::json!({"active": false, "sub": "a", "aud": aud})),
            "the token is not active"
        );
        assert_eq!(
            refused(&v, serde_json::json!({"active": true, "sub": "a", "aud": aud, "exp": now() - 60.0})),
            "the token has expired"
        );
        assert_eq!(
            refused(&v, serde_json::json!({"active": true, "sub": "a", "aud": aud, "nbf": now() + 60.0})),
            "the token is not valid yet"
        );
        assert_eq!(
            refused(&v, serde_json::json!({"active": true, "sub": "a", "aud": ["x", "y"]})),
            "the token is for another resource"
        );
        assert_eq!(refused(&v, serde_json::json!({"active": true, "sub": "a"})), "the token names no audience");
        assert_eq!(
            refused(&v, serde_json::json!({"active": true, "username": "a", "aud": aud})),
            "the token has no subject"
        );
        let lenient = verifier().require_audience(false).username_as_subject(true).issuer("https://as");
        assert_eq!(
            refused(&lenient, serde_json::json!({"active": true, "sub": "a", "iss": "https://evil"})),
            "the token is from another issuer"
        );
        assert_eq!(
            refused(&lenient, serde_json::json!({"active": true, "sub": "a"})),
            "the token is from another issuer",
            "an issuer is required once one is set"
        );
        assert_eq!(
            refused(&lenient, serde_json::json!({"active": true, "sub": "a", "aud": "x", "iss": "https://as"})),
            "the token is for another resource",
            "a wrong audience is refused even when none is required"
        );
        let (p, ..) =
            lenient.admit(answer(serde_json::json!({"active": true, "username": "bob", "iss": "https://as"}))).unwrap();
        assert_eq!(p.subject, "bob");
    }

    #[test]
    fn answers_without_active_are_malformed() {
        assert!(serde_json::from_str::<Introspection>(r#"{"sub": "a"}"#).is_err());
        assert!(serde_json::from_str::<Introspection>(r#"{"active": "yes"}"#).is_err());
    }

    #[test]
    fn the_cache_capacity_is_the_builders() {
        assert_eq!(verifier().cache.capacity(), DEFAULT_INTROSPECTION_CACHE_CAPACITY);
        let none = verifier().cache_capacity(0);
        let g = none.cache.generation();
        none.cache.remember(
            g,
            none.cache.key("t1"),
            &Arc::new(Principal::new("a", Vec::<String>::new())),
            Duration::from_secs(10),
            None,
        );
        assert_eq!(none.cached(), 0);
    }

    #[test]
    fn the_client_auth_method_applies_before_or_after_the_credentials() {
        let before =
            verifier().client_auth_method(ClientAuthMethod::ClientSecretPost).client_credentials("id", "s3cr3t");
        assert_eq!(before.auth_method, ClientAuthMethod::ClientSecretPost);
        let after =
            verifier().client_credentials("id", "s3cr3t").client_auth_method(ClientAuthMethod::ClientSecretPost);
        assert_eq!(after.auth_method, ClientAuthMethod::ClientSecretPost);
        let default = verifier().client_credentials("id", "s3cr3t");
        assert_eq!(default.auth_method, ClientAuthMethod::ClientSecretBasic);
        let debug = format!("{default:?}");
        assert!(debug.contains("ClientSecretBasic as id") && !debug.contains("s3cr3t"), "no secret in Debug: {debug}");
    }
}
