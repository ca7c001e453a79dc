//! The Streamable HTTP server as an OAuth 2.1 protected resource (feature `auth`), as the MCP authorization
//! specification (2025-11-25, 2026-07-28) asks of it:
//!
//! - its protected resource metadata (RFC 9728) at `/.well-known/oauth-protected-resource` followed by the MCP
//!   endpoint's path;
//! - a request without a token answered `401` with `WWW-Authenticate: Bearer resource_metadata="..."`, one with a
//!   token that does not verify `401` with `error="invalid_token"`, one without a scope every call needs `403` with
//!   `error="insufficient_scope"`;
//! - tokens bound to this server as their audience (RFC 8707): a token minted for another resource is refused.
//!
//! A [`ResourceServer`] holds what the metadata says and a [`TokenVerifier`]: [`JwtVerifier`] (JWT access tokens
//! checked against a JWKS from a file, inline JSON or a URL), [`IntrospectionVerifier`] (opaque tokens the
//! authorization server is asked about, RFC 7662), or [`StaticTokens`] for a small deployment. The
//! caller a token names, a [`Principal`], goes with the request: [`principal`] finds it in a tool call's context,
//! and the server makes it the call's principal ([`CallOptions::principal`](keel_tools_core::executor::CallOptions::principal))
//! unless `call_options` sets one. A session belongs to the principal that opened it: a request on it with another
//! principal's token is refused `403`, before the SDK reads it.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::net::IpAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Value, json};

pub use crate::caller::{Principal, principal};

#[path = "introspection.rs"]
mod introspection;
#[path = "token_cache.rs"]
mod token_cache;
pub use introspection::{
    ClientAuthMethod, DEFAULT_INTROSPECTION_CACHE_CAPACITY, DEFAULT_INTROSPECTION_CACHE_TTL,
    DEFAULT_INTROSPECTION_CONCURRENCY, DEFAULT_INTROSPECTION_REFUSAL_TTL, DEFAULT_INTROSPECTION_TIMEOUT,
    DEFAULT_INTROSPECTION_TOKENS_PER_CLIENT, IntrospectionVerifier,
};
use token_cache::{TokenCache, digest};

/// The future a [`TokenVerifier`] returns.
/// The principal comes in an [`Arc`] so that a verifier that keeps principals (a cache of verified tokens) hands
/// out the same one on every request instead of a copy.
pub type VerifyFuture<'a> = Pin<Box<dyn Future<Output = Result<Arc<Principal>, TokenError>> + Send + 'a>>;

/// Why a token was refused. Its text goes to the client as the `error_description`, so it says what is wrong
/// with the token, never anything of the server's keys or configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenError {
    description: String,
}

impl TokenError {
    /// A refusal saying `description`.
    pub fn new(description: impl Into<String>) -> TokenError {
        TokenError { description: description.into() }
    }

    /// What is wrong with the token.
    pub fn description(&self) -> &str {
        &self.description
    }
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.description)
    }
}

impl std::error::Error for TokenError {}

/// Checks a bearer token and says whom it speaks for.
pub trait TokenVerifier: Send + Sync {
    /// The principal of `token`, or why it is refused.
    fn verify<'a>(&'a self, token: &'a str) -> VerifyFuture<'a>;

    /// As [`verify`](TokenVerifier::verify), for a request from the client at `client` (its address, when the
    /// server knows it). A verifier that asks another server about tokens may limit what each client can make it
    /// ask ([`IntrospectionVerifier`] does); by default the address is not used.
    fn verify_from<'a>(&'a self, token: &'a str, client: Option<IpAddr>) -> VerifyFuture<'a> {
        let _ = client;
        self.verify(token)
    }
}

/// Fixed bearer tokens, each for one principal: for a small deployment without an authorization server. Tokens
/// are compared in constant time.
#[derive(Clone, Default)]
pub struct StaticTokens {
    tokens: Vec<(Vec<u8>, Arc<Principal>)>,
}

impl fmt::Debug for StaticTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let subjects: Vec<&str> = self.tokens.iter().map(|(_, p)| p.subject.as_str()).collect();
        f.debug_struct("StaticTokens").field("subjects", &subjects).finish()
    }
}

impl StaticTokens {
    /// No tokens.
    pub fn new() -> StaticTokens {
        StaticTokens::default()
    }

    /// Accepts `token` for `principal`.
    #[must_use]
    pub fn token(mut self, token: impl AsRef<str>, principal: Principal) -> StaticTokens {
        self.tokens.push((token.as_ref().as_bytes().to_vec(), Arc::new(principal)));
        self
    }
}

/// Equal bytes, compared in time that depends only on the lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl TokenVerifier for StaticTokens {
    fn verify<'a>(&'a self, token: &'a str) -> VerifyFuture<'a> {
        // Every token is compared, whichever matches.
        let mut found = None;
        for (known, principal) in &self.tokens {
            if constant_time_eq(known, token.as_bytes()) {
                found = Some(principal.clone());
            }
        }
        Box::pin(async move { found.ok_or_else(|| TokenError::new("the token is not valid")) })
    }
}

/// A JWKS's usable keys, by `kid`.
type KeyMap = HashMap<String, (DecodingKey, Algorithm)>;

/// Where a [`JwtVerifier`] finds its keys.
enum Keys {
    /// A fixed set (a file, or JSON given inline).
    Fixed(Arc<KeyMap>),
    /// Fetched from a URL, cached until the set's max-age, and fetched again then or when a token names a key the
    /// cache lacks (at most once per `refetch_after` either way); one fetch at a time.
    Url {
        url: String,
        client: reqwest::Client,
        /// Why the URL is not fetched at all (not `https://`, nor `http://` on loopback), if it is not.
        refused: Option<String>,
        cache: Mutex<Cached>,
        /// Held by the one fetch in flight; the others wait for it and take what it found.
        fetching: tokio::sync::Mutex<()>,
    },
}

#[derive(Default)]
struct Cached {
    keys: Arc<KeyMap>,
    /// When the set was last asked for, whatever came of it.
    fetched: Option<Instant>,
    /// Fetches that ended, whatever came of them: a caller that waited for the fetch in flight sees it changed.
    attempts: u64,
    /// When the keys were last fetched, and until when they are fresh (the set's max-age).
    succeeded: Option<Instant>,
    expires: Option<Instant>,
    /// The SHA-256 digest of the document the keys were read from, to tell a changed set from the same one.
    document: Option<[u8; 32]>,
}

/// How long the keys of a JWKS fetched from a URL are used before the set is fetched again, when its response
/// names no `Cache-Control: max-age`.
pub const DEFAULT_JWKS_MAX_AGE: Duration = Duration::from_secs(300);
/// The longest the keys of a JWKS fetched from a URL are used before the set is fetched again, whatever its
/// `Cache-Control` says; and the longest they are used at all when fetching it again keeps failing.
pub const MAX_JWKS_MAX_AGE: Duration = Duration::from_secs(3600);
/// The largest JWKS document read from a URL; a larger one counts as a failed fetch.
pub const MAX_JWKS_BYTES: usize = 256 * 1024;

/// The `max-age` of a response's `Cache-Control` (`no-cache` and `no-store` count as `0`), if it names one.
fn max_age(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let mut found = None;
    for value in headers.get_all(reqwest::header::CACHE_CONTROL) {
        let Ok(value) = value.to_str() else { continue };
        for directive in value.split(',').map(str::trim) {
            let (name, argument) = directive.split_once('=').unwrap_or((directive, ""));
            let name = name.trim().to_ascii_lowercase();
            match name.as_str() {
                "no-cache" | "no-store" => return Some(Duration::ZERO),
                "max-age" => {
                    if let Ok(seconds) = argument.trim().trim_matches('"').parse::<u64>() {
                        found = Some(Duration::from_secs(seconds));
                    }
                }
                _ => {}
            }
        }
    }
    found
}

/// Why the JWKS at `url` is never fetched: it must be `https://`, or `http://` on a loopback host.
fn jwks_url_refusal(url: &str) -> Option<String> {
    let parsed = match reqwest::Url::parse(url) {
        Ok(parsed) => parsed,
        Err(e) => return Some(format!("the JWKS URL {url:?} is not a URL: {e}")),
    };
    match parsed.scheme() {
        "https" => None,
        "http" => {
            let host = parsed.host_str().unwrap_or("");
            let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
            let loopback = match host.parse::<std::net::IpAddr>() {
                Ok(ip) => ip.is_loopback(),
                Err(_) => host.eq_ignore_ascii_case("localhost"),
            };
            (!loopback).then(|| format!("the JWKS URL {url} is http:// on a host that is not loopback; use https://"))
        }
        other => Some(format!("the JWKS URL {url} is not http:// or https:// ({other})")),
    }
}

/// The default number of verified tokens a [`JwtVerifier`] keeps.
pub const DEFAULT_JWT_CACHE_CAPACITY: usize = 10_000;

/// JWT access tokens checked against a JWKS: the signature with the key the token's `kid` names, the algorithm
/// against an allowlist of asymmetric ones (never `none`, never HMAC: a public key is no secret), the issuer, the
/// audience (this server's resource URI, RFC 8707), `exp` (required) and `nbf` with a small leeway, and that the
/// token has a subject.
///
/// **Cache.** A token that verified is kept, so that its next requests are not decoded and their signature not
/// checked again: keyed by a keyed 128-bit digest of the token (SipHash-2-4 under a key drawn at random for each
/// verifier; never the token itself), until the token's `exp` (a
/// token admitted only within the leeway past its `exp`, or before its `nbf`, is not kept), at most
/// [`cache_capacity`](JwtVerifier::cache_capacity) of them (10 000 by default; when full, expired entries are
/// dropped, then the one that expires first). The first request with each token pays the full verification.
/// Refusals are not cached. When a JWKS fetched again from its URL differs from the one before, the cache is
/// emptied, so a token signed by a key since removed is refused from then on. A cached token is accepted until its
/// `exp` whatever happens to it at the authorization server: a JWT cannot be revoked before its `exp` anyway (for
/// that, use short-lived tokens or [`IntrospectionVerifier`]).
pub struct JwtVerifier {
    issuer: String,
    audience: String,
    keys: Keys,
    algorithms: Vec<Algorithm>,
    leeway: Duration,
    refetch_after: Duration,
    cache: TokenCache,
}

impl fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = match &self.keys {
            Keys::Fixed(k) => format!("{} fixed keys", k.len()),
            Keys::Url { url, .. } => format!("from {url}"),
        };
        f.debug_struct("JwtVerifier")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("keys", &keys)
            .field("algorithms", &self.algorithms)
            .field("cache_capacity", &self.cache.capacity())
            .finish_non_exhaustive()
    }
}

/// Why a [`JwtVerifier`] or an [`IntrospectionVerifier`] could not be
/// made. When an error of another library is the cause (the JWKS's parser, the file's I/O, the URL's parser, the
/// HTTP client, keel-tools-tls), it is the [`source`](std::error::Error::source).
#[derive(Debug)]
pub struct AuthConfigError {
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl AuthConfigError {
    pub(super) fn new(message: impl Into<String>) -> AuthConfigError {
        AuthConfigError { message: message.into(), source: None }
    }

    /// `message`, with `source` as the cause.
    pub(super) fn caused_by(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> AuthConfigError {
        AuthConfigError { message: message.into(), source: Some(Box::new(source)) }
    }
}

impl fmt::Display for AuthConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AuthConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// The asymmetric algorithms a token may be signed with by default.
pub const DEFAULT_ALGORITHMS: [Algorithm; 7] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// The keys of a JWKS document that can verify tokens, by `kid`: RSA, EC and OKP keys for signing, each with the
/// algorithm it is for (its `alg`, or the one its type and curve imply). Octet (HMAC) keys and keys without a
/// `kid` are left out.
fn usable_keys(set: &JwkSet) -> KeyMap {
    let mut keys = HashMap::new();
    for jwk in &set.keys {
        let Some(kid) = jwk.common.key_id.clone() else { continue };
        if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
            continue;
        }
        let Some(alg) = key_algorithm(jwk) else { continue };
        if let Ok(key) = DecodingKey::from_jwk(jwk) {
            keys.insert(kid, (key, alg));
        }
    }
    keys
}

/// The algorithm a key is for.
fn key_algorithm(jwk: &Jwk) -> Option<Algorithm> {
    use jsonwebtoken::jwk::{EllipticCurve, KeyAlgorithm};
    if let Some(alg) = jwk.common.key_algorithm {
        return match alg {
            KeyAlgorithm::RS256 => Some(Algorithm::RS256),
            KeyAlgorithm::RS384 => Some(Algorithm::RS384),
            KeyAlgorithm::RS512 => Some(Algorithm::RS512),
            KeyAlgorithm::PS256 => Some(Algorithm::PS256),
            KeyAlgorithm::PS384 => Some(Algorithm::PS384),
            KeyAlgorithm::PS512 => Some(Algorithm::PS512),
            KeyAlgorithm::ES256 => Some(Algorithm::ES256),
            KeyAlgorithm::ES384 => Some(Algorithm::ES384),
            KeyAlgorithm::EdDSA => Some(Algorithm::EdDSA),
            _ => None,
        };
    }
    match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Some(Algorithm::RS256),
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => Some(Algorithm::ES256),
            EllipticCurve::P384 => Some(Algorithm::ES384),
            _ => None,
        },
        AlgorithmParameters::OctetKeyPair(_) => Some(Algorithm::EdDSA),
        _ => None,
    }
}

fn parse_jwks(text: &str) -> Result<KeyMap, AuthConfigError> {
    let set: JwkSet = serde_json::from_str(text)
        .map_err(|e| AuthConfigError::caused_by(format!("the JWKS is not a JWK set: {e}"), e))?;
    Ok(usable_keys(&set))
}

impl JwtVerifier {
    fn new(issuer: &str, audience: &str, keys: Keys) -> JwtVerifier {
        JwtVerifier {
            issuer: issuer.to_owned(),
            audience: audience.to_owned(),
            keys,
            algorithms: DEFAULT_ALGORITHMS.to_vec(),
            leeway: Duration::from_secs(30),
            refetch_after: Duration::from_secs(30),
            cache: TokenCache::new(DEFAULT_JWT_CACHE_CAPACITY),
        }
    }

    /// Tokens from `issuer` for `audience` (this server's resource URI), checked with the keys of the JWKS document
    /// `jwks` (JSON text).
    ///
    /// # Errors
    ///
    /// When `jwks` is not a JWK set, or holds no key that can verify a token.
    pub fn from_jwks_json(issuer: &str, audience: &str, jwks: &str) -> Result<JwtVerifier, AuthConfigError> {
        let keys = parse_jwks(jwks)?;
        if keys.is_empty() {
            return Err(AuthConfigError::new(
                "the JWKS holds no key that can verify a token (RSA, EC or OKP, with a kid)",
            ));
        }
        Ok(JwtVerifier::new(issuer, audience, Keys::Fixed(Arc::new(keys))))
    }

    /// As [`from_jwks_json`](JwtVerifier::from_jwks_json), with the document read from `path`.
    ///
    /// # Errors
    ///
    /// When the file cannot be read, or as [`from_jwks_json`](JwtVerifier::from_jwks_json).
    pub fn from_jwks_file(
        issuer: &str,
        audience: &str,
        path: impl AsRef<Path>,
    ) -> Result<JwtVerifier, AuthConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| AuthConfigError::caused_by(format!("cannot read the JWKS {}: {e}", path.display()), e))?;
        JwtVerifier::from_jwks_json(issuer, audience, &text)
    }

    /// Tokens from `issuer` for `audience`, checked with the keys of the JWKS at `url` (the authorization
    /// server's `jwks_uri`).
    ///
    /// **Freshness.** The set is fetched on first use and its keys kept for the `max-age` of the response's
    /// `Cache-Control` (`no-cache` and `no-store` count as `0`), at least the
    /// [`refetch_interval`](JwtVerifier::refetch_interval) (30 s by default) and at most [`MAX_JWKS_MAX_AGE`]
    /// (1 h), or [`DEFAULT_JWKS_MAX_AGE`] (5 min) when it names none. Past that, the next token (whichever key it
    /// names, cached or not) makes the server fetch the set again first, so a key the authorization server dropped
    /// is refused from that fetch on; a set that changed empties the verified-token cache. A token naming a key not
    /// in the set makes the server fetch it again too, at most once per refetch interval, so that tokens naming
    /// unknown keys cannot make the server hammer its authorization server. One fetch is in flight at a time: the
    /// requests that need it wait for it and take what it found. When a fetch fails the keys fetched before stay in
    /// use (it is tried again at most once per refetch interval), never longer than [`MAX_JWKS_MAX_AGE`] after the
    /// last fetch that succeeded; past that every token is refused as not checkable now.
    ///
    /// **Transport.** `url` must be `https://`, or `http://` on a loopback host (`127.0.0.0/8`, `::1`,
    /// `localhost`); any other URL is never fetched, and every token is refused as not checkable now (the cause is
    /// logged). Redirects are not followed, a fetch may take 10 s, and a document past [`MAX_JWKS_BYTES`]
    /// (256 KiB) is refused; each of these counts as a failed fetch.
    pub fn from_jwks_url(issuer: &str, audience: &str, url: impl Into<String>) -> JwtVerifier {
        let url = url.into();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        let refused = jwks_url_refusal(&url);
        if let Some(why) = &refused {
            tracing::error!(url = %url, "{why}: no token will verify");
        }
        let keys = Keys::Url {
            url,
            client,
            refused,
            cache: Mutex::new(Cached::default()),
            fetching: tokio::sync::Mutex::new(()),
        };
        JwtVerifier::new(issuer, audience, keys)
    }

    /// The algorithms a token may be signed with (default [`DEFAULT_ALGORITHMS`]); HMAC ones are ignored.
    #[must_use]
    pub fn algorithms(mut self, algorithms: impl IntoIterator<Item = Algorithm>) -> JwtVerifier {
        self.algorithms = algorithms
            .into_iter()
            .filter(|a| !matches!(a, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512))
            .collect();
        self
    }

    /// For a JWKS URL: the least time between two fetches (default 30 s), and the least time its keys are kept
    /// whatever the set's `max-age` says. A token naming a key the cached set lacks makes the server fetch the set
    /// again only when this much time has passed since the last fetch.
    #[must_use]
    pub fn refetch_interval(mut self, interval: Duration) -> JwtVerifier {
        self.refetch_after = interval;
        self
    }

    /// The clock skew allowed on `exp` and `nbf` (default 30 s).
    #[must_use]
    pub fn leeway(mut self, leeway: Duration) -> JwtVerifier {
        self.leeway = leeway;
        self
    }

    /// The most verified tokens kept at once (default [`DEFAULT_JWT_CACHE_CAPACITY`]); `0` keeps none, so that
    /// every request's token is decoded and its signature checked.
    #[must_use]
    pub fn cache_capacity(mut self, capacity: usize) -> JwtVerifier {
        self.cache = TokenCache::new(capacity);
        self
    }

    /// Verified tokens in the cache now (expired ones included until they are dropped).
    pub fn cached(&self) -> usize {
        self.cache.len()
    }

    /// The keys to verify a token naming `kid` with (`None`: whichever key): the fixed set, or for a URL the
    /// cached set, fetched first when it has expired or lacks `kid` (see
    /// [`from_jwks_url`](JwtVerifier::from_jwks_url)).
    async fn keys(&self, kid: Option<&str>) -> Result<Arc<KeyMap>, TokenError> {
        let (url, client, refused, cache, fetching) = match &self.keys {
            Keys::Fixed(keys) => return Ok(keys.clone()),
            Keys::Url { url, client, refused, cache, fetching } => (url, client, refused, cache, fetching),
        };
        let lock = || cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let seen = {
            let c = lock();
            let now = Instant::now();
            let wanted = c.expires.is_none_or(|at| now >= at) || kid.is_some_and(|kid| !c.keys.contains_key(kid));
            let allowed = c.fetched.is_none_or(|at| now.duration_since(at) >= self.refetch_after);
            if !(wanted && allowed) {
                return self.usable(&c);
            }
            c.attempts
        };
        let _fetching = fetching.lock().await;
        if lock().attempts != seen {
            // Fetched while this one waited: what that fetch found is the answer.
            return self.usable(&lock());
        }
        let fetched = match refused {
            Some(why) => Err(why.clone()),
            None => fetch_jwks(client, url).await,
        };
        let mut c = lock();
        let now = Instant::now();
        c.fetched = Some(now);
        c.attempts += 1;
        match fetched {
            Ok((keys, document, max_age)) => {
                // Tokens verified with a key set that has changed are verified again: a key may have gone.
                if c.document.is_some_and(|before| before != document) {
                    self.cache.clear();
                }
                let keep = max_age.unwrap_or(DEFAULT_JWKS_MAX_AGE).max(self.refetch_after).min(MAX_JWKS_MAX_AGE);
                c.document = Some(document);
                c.keys = Arc::new(keys);
                c.succeeded = Some(now);
                c.expires = Some(now + keep);
            }
            Err(e) => tracing::warn!(url = %url, error = %e, "fetching the JWKS failed"),
        }
        self.usable(&c)
    }

    /// The cached keys, unless the last fetch that found them is older than [`MAX_JWKS_MAX_AGE`] (or there was
    /// none); then the token cache is emptied too, since what it holds was verified with those keys.
    fn usable(&self, c: &Cached) -> Result<Arc<KeyMap>, TokenError> {
        if c.succeeded.is_some_and(|at| at.elapsed() < MAX_JWKS_MAX_AGE) {
            return Ok(c.keys.clone());
        }
        if c.succeeded.is_some() {
            self.cache.clear();
        }
        Err(TokenError::new("the token's key cannot be checked now"))
    }
}

/// Fetches the JWKS at `url`: its usable keys, the digest of the document, and the response's `max-age`.
async fn fetch_jwks(client: &reqwest::Client, url: &str) -> Result<(KeyMap, [u8; 32], Option<Duration>), String> {
    let mut response = client.get(url).send().await.map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        // A redirect too: it is not followed.
        return Err(format!("status {}", response.status()));
    }
    if response.content_length().is_some_and(|n| n > MAX_JWKS_BYTES as u64) {
        return Err(format!("the document is larger than {MAX_JWKS_BYTES} bytes"));
    }
    let max_age = max_age(response.headers());
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > MAX_JWKS_BYTES {
            return Err(format!("the document is larger than {MAX_JWKS_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(body).map_err(|_| "the document is not UTF-8".to_owned())?;
    Ok((parse_jwks(&text).map_err(|e| e.to_string())?, digest(&text), max_age))
}

/// The claims keel reads of an access token.
#[derive(Deserialize)]
struct Claims {
    sub: Option<String>,
    iss: Option<String>,
    client_id: Option<String>,
    azp: Option<String>,
    scope: Option<String>,
    scp: Option<Value>,
    exp: Option<f64>,
    nbf: Option<f64>,
}

impl TokenVerifier for JwtVerifier {
    fn verify<'a>(&'a self, token: &'a str) -> VerifyFuture<'a> {
        Box::pin(async move {
            let cached = self.cache.key(token);
            if matches!(self.keys, Keys::Url { .. }) {
                // An expired set is fetched again before any token is taken from the cache: a cached token of a
                // key since dropped is refused once the set says so.
                self.keys(None).await?;
            }
            if let Some(principal) = self.cache.lookup(&cached) {
                return Ok(principal);
            }
            // Read before the key: a key set replaced from here on makes this verification's result not cached.
            let generation = self.cache.generation();
            let header =
                jsonwebtoken::decode_header(token).map_err(|_| TokenError::new("the token is not a signed JWT"))?;
            if !self.algorithms.contains(&header.alg) {
                return Err(TokenError::new(format!("tokens signed with {:?} are not accepted", header.alg)));
            }
            let kid = header.kid.ok_or_else(|| TokenError::new("the token names no key (kid)"))?;
            let keys = self.keys(Some(&kid)).await?;
            let (key, key_alg) =
                keys.get(&kid).cloned().ok_or_else(|| TokenError::new("the token's key is unknown"))?;
            if key_alg != header.alg {
                return Err(TokenError::new("the token's algorithm is not its key's"));
            }
            let mut validation = Validation::new(header.alg);
            validation.set_issuer(&[&self.issuer]);
            validation.set_audience(&[&self.audience]);
            validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
            validation.validate_nbf = true;
            validation.leeway = self.leeway.as_secs();
            let data = jsonwebtoken::decode::<Claims>(token, &key, &validation).map_err(|e| {
                use jsonwebtoken::errors::ErrorKind;
                TokenError::new(match e.kind() {
                    ErrorKind::ExpiredSignature => "the token has expired",
                    ErrorKind::ImmatureSignature => "the token is not valid yet",
                    ErrorKind::InvalidAudience => "the token is for another resource",
                    ErrorKind::InvalidIssuer => "the token is from another issuer",
                    ErrorKind::InvalidSignature => "the token's signature does not verify",
                    ErrorKind::MissingRequiredClaim(_) => "the token lacks a required claim (exp, iss, aud, sub)",
                    _ => "the token is not valid",
                })
            })?;
            let claims = data.claims;
            let mut scopes: Vec<String> =
                claims.scope.as_deref().unwrap_or_default().split_whitespace().map(str::to_owned).collect();
            match claims.scp {
                Some(Value::String(s)) => scopes.extend(s.split_whitespace().map(str::to_owned)),
                Some(Value::Array(a)) => scopes.extend(a.iter().filter_map(Value::as_str).map(str::to_owned)),
                _ => {}
            }
            let principal = Arc::new(Principal {
                subject: claims.sub.unwrap_or_default(),
                client_id: claims.client_id.or(claims.azp),
                scopes,
                issuer: claims.iss,
            });
            if let Some((keep, not_after)) = cache_window(claims.exp, claims.nbf) {
                self.cache.remember(generation, cached, &principal, keep, Some(not_after));
            }
            Ok(principal)
        })
    }
}

/// How long a verified token with `exp` and `nbf` may be cached from now, and the wall-clock time past which it
/// may not: until its `exp`, never within the leeway past it nor before its `nbf`.
fn cache_window(exp: Option<f64>, nbf: Option<f64>) -> Option<(Duration, SystemTime)> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs_f64();
    let exp = exp?;
    if exp <= now || nbf.is_some_and(|nbf| nbf > now) {
        return None;
    }
    let keep = Duration::try_from_secs_f64(exp - now).ok()?;
    let not_after = UNIX_EPOCH.checked_add(Duration::try_from_secs_f64(exp).ok()?)?;
    Some((keep, not_after))
}

/// This server as an OAuth 2.1 protected resource: what its metadata says, and who checks its tokens.
#[derive(Clone)]
pub struct ResourceServer {
    resource: String,
    authorization_servers: Vec<String>,
    scopes_supported: Vec<String>,
    required_scopes: Vec<String>,
    resource_name: Option<String>,
    verifier: Arc<dyn TokenVerifier>,
}

impl fmt::Debug for ResourceServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceServer")
            .field("resource", &self.resource)
            .field("authorization_servers", &self.authorization_servers)
            .field("required_scopes", &self.required_scopes)
            .finish_non_exhaustive()
    }
}

impl ResourceServer {
    /// The resource at `resource` (the MCP endpoint's canonical URI, e.g. `https://mcp.example.com/mcp`: the
    /// audience its tokens must name), its tokens checked by `verifier`.
    pub fn new(resource: impl Into<String>, verifier: impl TokenVerifier + 'static) -> ResourceServer {
        ResourceServer {
            resource: resource.into(),
            authorization_servers: Vec::new(),
            scopes_supported: Vec::new(),
            required_scopes: Vec::new(),
            resource_name: None,
            verifier: Arc::new(verifier),
        }
    }

    /// An authorization server that issues tokens for this resource (its issuer URL), listed in the metadata.
    #[must_use]
    pub fn authorization_server(mut self, issuer: impl Into<String>) -> ResourceServer {
        self.authorization_servers.push(issuer.into());
        self
    }

    /// The scopes the metadata lists.
    #[must_use]
    pub fn scopes_supported(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> ResourceServer {
        self.scopes_supported = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Scopes every request needs; a token without one of them is refused `403 insufficient_scope`, naming them.
    #[must_use]
    pub fn require_scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> ResourceServer {
        self.required_scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// A name for people, in the metadata.
    #[must_use]
    pub fn resource_name(mut self, name: impl Into<String>) -> ResourceServer {
        self.resource_name = Some(name.into());
        self
    }

    /// The resource URI.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The path the metadata is served at: `/.well-known/oauth-protected-resource` followed by the resource
    /// URI's path (RFC 9728 §3.1), e.g. `/.well-known/oauth-protected-resource/mcp`.
    pub fn metadata_path(&self) -> String {
        let path = resource_path(&self.resource);
        format!("/.well-known/oauth-protected-resource{}", if path == "/" { "" } else { path })
    }

    /// The metadata's URL, as `WWW-Authenticate` names it.
    pub fn metadata_url(&self) -> String {
        format!("{}{}", resource_origin(&self.resource), self.metadata_path())
    }

    /// The protected resource metadata document (RFC 9728).
    pub fn metadata(&self) -> Value {
        let mut m = json!({
            "resource": self.resource,
            "authorization_servers": self.authorization_servers,
            "bearer_methods_supported": ["header"],
        });
        if !self.scopes_supported.is_empty() {
            m["scopes_supported"] = json!(self.scopes_supported);
        }
        if let Some(name) = &self.resource_name {
            m["resource_name"] = json!(name);
        }
        m
    }

    /// The `WWW-Authenticate` value of a refusal: `error` (`invalid_token`, `insufficient_scope`) with its
    /// description, or none for a request without a token.
    pub(crate) fn challenge(&self, error: Option<(&str, &str)>, scope: Option<&str>) -> String {
        let quote = |s: &str| s.replace(['"', '\\'], "'");
        let mut parts = Vec::new();
        if let Some((error, description)) = error {
            parts.push(format!("error=\"{error}\""));
            parts.push(format!("error_description=\"{}\"", quote(description)));
        }
        let scope = scope
            .map(str::to_owned)
            .or_else(|| (!self.required_scopes.is_empty()).then(|| self.required_scopes.join(" ")));
        if let Some(scope) = scope {
            parts.push(format!("scope=\"{}\"", quote(&scope)));
        }
        parts.push(format!("resource_metadata=\"{}\"", self.metadata_url()));
        format!("Bearer {}", parts.join(", "))
    }

    /// Who the request's bearer token speaks for, or the refusal: `(status, WWW-Authenticate)`; for a request
    /// whose client's address is not known (see [`authenticate_from`](ResourceServer::authenticate_from)).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) async fn authenticate(&self, authorization: Option<&str>) -> Result<Arc<Principal>, (u16, String)> {
        self.authenticate_from(None, authorization).await
    }

    /// As [`authenticate`](ResourceServer::authenticate), for a request from the client at `client`: the verifier
    /// is given the address ([`TokenVerifier::verify_from`]), so that it can limit what one client makes it do.
    pub(crate) async fn authenticate_from(
        &self,
        client: Option<IpAddr>,
        authorization: Option<&str>,
    ) -> Result<Arc<Principal>, (u16, String)> {
        let Some(value) = authorization else {
            return Err((401, self.challenge(None, None)));
        };
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty());
        let Some(token) = token else {
            return Err((401, self.challenge(Some(("invalid_request", "use an Authorization: Bearer token")), None)));
        };
        let principal = match self.verifier.verify_from(token, client).await {
            Ok(p) => p,
            Err(e) => return Err((401, self.challenge(Some(("invalid_token", e.description())), None))),
        };
        let missing: Vec<&str> =
            self.required_scopes.iter().map(String::as_str).filter(|s| !principal.has_scope(s)).collect();
        if !missing.is_empty() {
            let scope = self.required_scopes.join(" ");
            let description = format!("the token lacks the scope {}", missing.join(" "));
            return Err((403, self.challenge(Some(("insufficient_scope", &description)), Some(&scope))));
        }
        Ok(principal)
    }
}

/// `https://host:port` of a URI.
fn resource_origin(uri: &str) -> &str {
    let after_scheme = uri.find("://").map_or(0, |i| i + 3);
    match uri[after_scheme..].find('/') {
        Some(i) => &uri[..after_scheme + i],
        None => uri,
    }
}

/// The path of a URI (`/` when it has none).
fn resource_path(uri: &str) -> &str {
    let origin = resource_origin(uri);
    let path = &uri[origin.len()..];
    let path = path.split(['?', '#']).next().unwrap_or("").trim_end_matches('/');
    if path.is_empty() { "/" } else { path }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_sits_under_the_resources_path() {
        let rs = ResourceServer::new("https://mcp.example.com/mcp", StaticTokens::new())
            .authorization_server("https://auth.example.com")
            .scopes_supported(["tools.read"]);
        assert_eq!(rs.metadata_path(), "/.well-known/oauth-protected-resource/mcp");
        assert_eq!(rs.metadata_url(), "https://mcp.example.com/.well-known/oauth-protected-resource/mcp");
        assert_eq!(rs.metadata()["authorization_servers"], json!(["https://auth.example.com"]));
        let root = ResourceServer::new("https://mcp.example.com", StaticTokens::new());
        assert_eq!(root.metadata_path(), "/.well-known/oauth-protected-resource");
        assert_eq!(resource_path("http://127.0.0.1:9/a/b/?x"), "/a/b");
    }

    #[test]
    fn a_challenge_quotes_what_it_says() {
        let rs = ResourceServer::new("https://h/mcp", StaticTokens::new()).require_scopes(["a", "b"]);
        assert_eq!(
            rs.challenge(Some(("invalid_token", "the \"token\" expired")), None),
            "Bearer error=\"invalid_token\", error_description=\"the 'token' expired\", scope=\"a b\", \
             resource_metadata=\"https://h/.well-known/oauth-protected-resource/mcp\""
        );
    }

    #[tokio::test]
    async fn static_tokens_and_required_scopes() {
        let tokens = StaticTokens::new()
            .token("t-alice", Principal::new("alice", ["tools.read", "tools.call"]))
            .token("t-bob", Principal::new("bob", ["tools.read"]));
        let rs = ResourceServer::new("https://h/mcp", tokens).require_scopes(["tools.call"]);
        assert_eq!(rs.authenticate(Some("Bearer t-alice")).await.unwrap().subject, "alice");
        let (status, challenge) = rs.authenticate(Some("Bearer t-bob")).await.unwrap_err();
        assert_eq!(status, 403);
        assert!(challenge.contains("insufficient_scope") && challenge.contains("scope=\"tools.call\""), "{challenge}");
        let (status, challenge) = rs.authenticate(None).await.unwrap_err();
        assert_eq!(status, 401);
        assert!(!challenge.contains("error="), "{challenge}");
        let (status, challenge) = rs.authenticate(Some("Bearer t-eve")).await.unwrap_err();
        assert_eq!((status, challenge.contains("invalid_token")), (401, true));
        let (status, challenge) = rs.authenticate(Some("Basic dXNlcg==")).await.unwrap_err();
        assert_eq!((status, challenge.contains("invalid_request")), (401, true));
    }

    #[test]
    fn a_verifier_that_cannot_be_made_keeps_its_cause() {
        use std::error::Error;
        let e = JwtVerifier::from_jwks_json("https://issuer", "https://mcp", "not json").unwrap_err();
        assert!(e.to_string().starts_with("the JWKS is not a JWK set: "), "{e}");
        assert!(e.source().is_some_and(|s| s.is::<serde_json::Error>()), "{e:?}");
        let e =
            JwtVerifier::from_jwks_file("https://issuer", "https://mcp", "/nonexistent/keel-jwks.json").unwrap_err();
        assert!(e.source().is_some_and(|s| s.is::<std::io::Error>()), "{e:?}");
        let e = JwtVerifier::from_jwks_json("https://issuer", "https://mcp", r#"{"keys": []}"#).unwrap_err();
        assert!(e.source().is_none(), "found wrong by keel itself: {e:?}");
    }

    #[test]
    fn a_jwks_url_must_be_https_or_on_loopback() {
        assert_eq!(jwks_url_refusal("https://auth.example.com/jwks.json"), None);
        for loopback in
            ["http://127.0.0.1:8080/jwks", "http://127.9.9.9/jwks", "http://[::1]:9/jwks", "http://localhost/j"]
        {
            assert_eq!(jwks_url_refusal(loopback), None, "{loopback}");
        }
        for refused in ["http://auth.example.com/jwks.json", "http://10.0.0.1/jwks", "ftp://h/jwks", "not a url"] {
            assert!(jwks_url_refusal(refused).is_some(), "{refused}");
        }
    }

    #[test]
    fn the_max_age_of_a_cache_control() {
        let headers = |values: &[&str]| {
            let mut h = reqwest::header::HeaderMap::new();
            for v in values {
                h.append(reqwest::header::CACHE_CONTROL, v.parse().unwrap());
            }
            max_age(&h)
        };
        assert_eq!(headers(&[]), None);
        assert_eq!(headers(&["public, max-age=600"]), Some(Duration::from_secs(600)));
        assert_eq!(headers(&["Max-Age=\"60\", must-revalidate"]), Some(Duration::from_secs(60)));
        assert_eq!(headers(&["public", "max-age=5"]), Some(Duration::from_secs(5)));
        assert_eq!(headers(&["max-age=600, no-cache"]), Some(Duration::ZERO));
        assert_eq!(headers(&["no-store"]), Some(Duration::ZERO));
        assert_eq!(headers(&["max-age=soon"]), None);
    }

    #[test]
    fn constant_time_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
