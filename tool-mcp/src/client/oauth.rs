//! Logging in to an MCP server that is an OAuth 2.1 protected resource (feature `oauth`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use keel_tools_mcp::client::RemoteServer;
//! use keel_tools_mcp::client::oauth::{Login, LoopbackBrowser};
//!
//! // The user approves in a browser; the authorization server redirects back to this loopback address.
//! let login = Login::new("http://127.0.0.1:8976/callback", LoopbackBrowser::new()).client_name("incident desk");
//! let tickets = RemoteServer::http("https://mcp.example.com/mcp").login(login).connect("tickets").await?;
//! let tools = tickets.import_unpinned().await?;
//! # Ok(()) }
//! ```
//!
//! What happens, as the MCP authorization spec (2025-11-25 and 2026-07-28) lays it out:
//!
//! 1. The first request goes out without a token (or with the token of a [`Login::credential_store`] that holds
//!    one). A `401` carries `WWW-Authenticate: Bearer resource_metadata="..."`.
//! 2. **Discovery** from that challenge: the protected resource metadata (RFC 9728), then the authorization
//!    server's metadata (RFC 8414, or OpenID Connect discovery). The resource the metadata names must be the
//!    server's URL (or a parent of it); otherwise the login fails (a server cannot send the client to collect a
//!    token for another resource).
//! 3. **Client registration**, in the spec's order: a pre-registered client ([`Login::client`]), a client ID
//!    metadata document when the server supports it ([`Login::client_metadata_url`]), else dynamic registration
//!    (RFC 7591) under [`Login::client_name`].
//! 4. **Authorization code with PKCE** (S256), the `resource` parameter (RFC 8707) and the scopes the challenge
//!    or the metadata ask for (`offline_access` added when the server offers it, for a refresh token). The
//!    [`Authorizer`] takes the user to the authorization URL and returns the redirect; its `state` must match
//!    and its `iss` (RFC 9207) must be the authorization server's when the server says it sends one.
//! 5. The code is exchanged for tokens at the token endpoint, authenticating the client as the server supports
//!    (`client_secret_basic`, `client_secret_post`, or `none` for a public client).
//!
//! Afterwards every request carries the access token. An expired or revoked token is refreshed once with the
//! refresh token; when that fails, the client logs in again from the new challenge (which may name another
//! authorization server: it then registers there afresh and never shows it the previous server's client or
//! tokens). A `403` with `error="insufficient_scope"` is **step-up**: the client asks for the union of the scopes
//! it holds and the challenged ones, then retries the request once. Step-ups are capped
//! ([`Login::max_step_ups`]), so a server that keeps refusing cannot hold the client in a loop.
//!
//! Tokens live in the [`Login::credential_store`] (in memory by default): give a store that persists them for a
//! login that outlives the process.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::auth::{
    AuthClient, AuthorizationCallback, AuthorizationManager, AuthorizationRequest, OAuthState, WWWAuthenticateParams,
};
pub use rmcp::transport::auth::{AuthError, CredentialStore, InMemoryCredentialStore, StoredCredentials};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// The future an [`Authorizer`] returns: the URL the authorization server redirected the user back to.
pub type AuthorizeFuture<'a> = Pin<Box<dyn Future<Output = Result<String, LoginError>> + Send + 'a>>;

/// Takes the user to an authorization URL and returns where the authorization server sent them back.
///
/// `redirect_uri` is the [`Login`]'s: the returned URL starts with it and carries `code` and `state` (and `iss`
/// when the server sends it), or `error`.
pub trait Authorizer: Send + Sync + 'static {
    /// Has `url` approved and returns the redirect URL.
    fn authorize<'a>(&'a self, url: &'a str, redirect_uri: &'a str) -> AuthorizeFuture<'a>;
}

/// Why logging in failed.
#[derive(Debug, Clone)]
pub struct LoginError {
    message: String,
    source: Option<Arc<AuthError>>,
}

impl LoginError {
    /// A failure described by `message`: for [`Authorizer`] implementations.
    pub fn new(message: impl Into<String>) -> LoginError {
        LoginError { message: message.into(), source: None }
    }

    fn auth(context: &str, error: AuthError) -> LoginError {
        LoginError { message: format!("{context}: {error}"), source: Some(Arc::new(error)) }
    }

    /// The OAuth error it comes from, when there is one.
    pub fn auth_error(&self) -> Option<&AuthError> {
        self.source.as_deref()
    }
}

impl fmt::Display for LoginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "logging in to the MCP server failed: {}", self.message)
    }
}

impl std::error::Error for LoginError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// How a connection logs in; see the [module docs](self). Given to [`HttpConnect::login`](super::HttpConnect::login).
#[derive(Clone)]
#[must_use]
pub struct Login {
    pub(crate) redirect_uri: String,
    pub(crate) authorizer: Arc<dyn Authorizer>,
    pub(crate) client_name: String,
    pub(crate) client_metadata_url: Option<String>,
    pub(crate) client: Option<(String, Option<String>)>,
    pub(crate) scopes: Vec<String>,
    pub(crate) store: Option<Arc<dyn CredentialStore>>,
    pub(crate) max_step_ups: u32,
}

impl fmt::Debug for Login {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Login")
            .field("redirect_uri", &self.redirect_uri)
            .field("client_name", &self.client_name)
            .field("client_metadata_url", &self.client_metadata_url)
            .field("client_id", &self.client.as_ref().map(|(id, _)| id))
            .field("scopes", &self.scopes)
            .field("max_step_ups", &self.max_step_ups)
            .finish_non_exhaustive()
    }
}

impl Login {
    /// A login whose authorization redirects to `redirect_uri` (registered with the authorization server, or
    /// sent in dynamic registration), approved through `authorizer`.
    pub fn new(redirect_uri: impl Into<String>, authorizer: impl Authorizer) -> Login {
        Login {
            redirect_uri: redirect_uri.into(),
            authorizer: Arc::new(authorizer),
            client_name: "keel".to_owned(),
            client_metadata_url: None,
            client: None,
            scopes: Vec::new(),
            store: None,
            max_step_ups: 2,
        }
    }

    /// The client's name in dynamic client registration. Default: `keel`.
    pub fn client_name(mut self, name: impl Into<String>) -> Login {
        self.client_name = name.into();
        self
    }

    /// The HTTPS URL of this client's ID metadata document: its client ID at an authorization server that
    /// advertises `client_id_metadata_document_supported`, instead of registering.
    pub fn client_metadata_url(mut self, url: impl Into<String>) -> Login {
        self.client_metadata_url = Some(url.into());
        self
    }

    /// A client registered with the authorization server beforehand: its ID and, for a confidential client, its
    /// secret. Registration is then skipped.
    pub fn client(mut self, client_id: impl Into<String>, client_secret: Option<String>) -> Login {
        self.client = Some((client_id.into(), client_secret));
        self
    }

    /// The scopes to ask for at the first login, instead of those the server's challenge or metadata name.
    pub fn scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Login {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Where tokens are kept: in memory by default. A store that already holds credentials for this server (and
    /// its current authorization server) is used without logging in.
    pub fn credential_store(mut self, store: impl CredentialStore + 'static) -> Login {
        self.store = Some(Arc::new(store));
        self
    }

    /// How many times one connection may step up its scopes after a `403 insufficient_scope`. Default: 2.
    pub fn max_step_ups(mut self, n: u32) -> Login {
        self.max_step_ups = n;
        self
    }
}

/// A [`CredentialStore`] shared by every manager of one connection.
struct SharedStore(Arc<dyn CredentialStore>);

#[async_trait::async_trait]
impl CredentialStore for SharedStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.0.load().await
    }
    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.0.save(credentials).await
    }
    async fn clear(&self) -> Result<(), AuthError> {
        self.0.clear().await
    }
    async fn on_refresh_token_rejected(&self, credentials: &StoredCredentials) -> Result<(), AuthError> {
        self.0.on_refresh_token_rejected(credentials).await
    }
    async fn acquire_refresh_guard(&self) -> Result<Option<rmcp::transport::auth::CredentialRefreshGuard>, AuthError> {
        self.0.acquire_refresh_guard().await
    }
}

/// The login state of one connection: the authorization manager its HTTP client takes tokens from.
pub(crate) struct LoginSession {
    url: String,
    login: Login,
    http: Option<reqwest::Client>,
    /// The HTTP client of the connection's transports: each request takes its token from `manager`.
    pub(crate) client: AuthClient<reqwest::Client>,
    manager: Arc<tokio::sync::Mutex<AuthorizationManager>>,
    step_ups: std::sync::atomic::AtomicU32,
}

impl LoginSession {
    /// A session for the server at `url`, its manager loaded from the login's store. `http` is the client for
    /// the OAuth requests when it must be this connection's (extra root certificates); otherwise the SDK's, which
    /// refuses metadata that points a public server at a private address.
    pub(crate) async fn new(
        url: &str,
        login: Login,
        client: reqwest::Client,
        http: Option<reqwest::Client>,
    ) -> Result<LoginSession, LoginError> {
        let mut manager = fresh_manager(url, &login, http.as_ref()).await?;
        if login.store.is_some() {
            // Credentials from an earlier run, when the store has them for the current authorization server.
            if let Err(e) = manager.initialize_from_store().await {
                tracing::debug!(error = %e, "no stored credentials used");
            }
        }
        let client = AuthClient::new(client, manager);
        Ok(LoginSession {
            url: url.to_owned(),
            login,
            http,
            manager: client.auth_manager.clone(),
            client,
            step_ups: std::sync::atomic::AtomicU32::new(0),
        })
    }

    /// Answers a `WWW-Authenticate` challenge from a `401` or `403`: a step-up for `insufficient_scope`, a new
    /// login otherwise. `Ok(false)` when it may not (the step-ups are spent).
    pub(crate) async fn answer(&self, challenge: &str) -> Result<bool, LoginError> {
        let base = url::Url::parse(&self.url).map_err(|e| LoginError::new(format!("the server URL: {e}")))?;
        let params = WWWAuthenticateParams::parse(challenge, &base);
        if params.is_insufficient_scope() {
            let Some(scope) = params.scope.as_deref().filter(|s| !s.trim().is_empty()) else {
                return Ok(false);
            };
            let used = self.step_ups.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if used >= self.login.max_step_ups {
                tracing::warn!(scope, "the MCP server asks for more scopes again; no step-up left");
                return Ok(false);
            }
            self.step_up(scope).await?;
            return Ok(true);
        }
        self.log_in(Some(challenge)).await?;
        Ok(true)
    }

    /// The whole login (discovery, registration, authorization, token), from `challenge` when there is one, with
    /// a fresh manager: nothing of an earlier authorization server's carries over.
    pub(crate) async fn log_in(&self, challenge: Option<&str>) -> Result<(), LoginError> {
        let manager = fresh_manager(&self.url, &self.login, self.http.as_ref()).await?;
        let mut request =
            AuthorizationRequest::new(self.login.redirect_uri.clone()).with_client_name(self.login.client_name.clone());
        if !self.login.scopes.is_empty() {
            request = request.with_scopes(self.login.scopes.iter().cloned());
        }
        if let Some(url) = &self.login.client_metadata_url {
            request = request.with_client_metadata_url(url.clone());
        }
        if let Some((id, secret)) = &self.login.client {
            request = request.with_preregistered_client(id.clone());
            if let Some(secret) = secret {
                request = request.with_client_secret(secret.clone());
            }
        }
        if let Some(challenge) = challenge {
            request = request.with_challenge(challenge);
        }
        let mut state = OAuthState::Unauthorized(manager);
        state.start_authorization(request).await.map_err(|e| LoginError::auth("discovery or registration", e))?;
        let url = state.get_authorization_url().await.map_err(|e| LoginError::auth("the authorization URL", e))?;
        let redirect = self.login.authorizer.authorize(&url, &self.login.redirect_uri).await?;
        let callback = parse_redirect(&redirect)?;
        state
            .handle_callback_with_issuer(&callback.code, &callback.csrf_token, callback.issuer.as_deref())
            .await
            .map_err(|e| LoginError::auth("the token request", e))?;
        let manager =
            state.into_authorization_manager().ok_or_else(|| LoginError::new("the authorization did not complete"))?;
        *self.manager.lock().await = manager;
        self.step_ups.store(0, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// A step-up: a new authorization for the scopes held plus `scope`, with the same client.
    async fn step_up(&self, scope: &str) -> Result<(), LoginError> {
        let url = {
            let manager = self.manager.lock().await;
            manager.request_scope_upgrade(scope).await.map_err(|e| LoginError::auth("the step-up", e))?
        };
        let redirect = self.login.authorizer.authorize(&url, &self.login.redirect_uri).await?;
        let callback = parse_redirect(&redirect)?;
        let manager = self.manager.lock().await;
        manager
            .exchange_code_for_token_with_issuer(&callback.code, &callback.csrf_token, callback.issuer.as_deref())
            .await
            .map_err(|e| LoginError::auth("the step-up's token request", e))?;
        Ok(())
    }
}

/// A manager for the server at `url` with the login's store, and `http` for its OAuth requests when given.
async fn fresh_manager(
    url: &str,
    login: &Login,
    http: Option<&reqwest::Client>,
) -> Result<AuthorizationManager, LoginError> {
    let mut manager = AuthorizationManager::new(url).await.map_err(|e| LoginError::auth("the server URL", e))?;
    if let Some(http) = http {
        manager.with_client(http.clone()).map_err(|e| LoginError::auth("the HTTP client", e))?;
    }
    if let Some(store) = &login.store {
        manager.set_credential_store(SharedStore(store.clone()));
    }
    Ok(manager)
}

/// The code, state and issuer of a redirect, or the authorization server's error.
fn parse_redirect(redirect: &str) -> Result<AuthorizationCallback, LoginError> {
    if let Ok(url) = url::Url::parse(redirect)
        && let Some((_, error)) = url.query_pairs().find(|(k, _)| k == "error")
    {
        let description = url.query_pairs().find(|(k, _)| k == "error_description").map(|(_, v)| v.into_owned());
        return Err(LoginError::new(match description {
            Some(d) => format!("the authorization server refused: {error}: {d}"),
            None => format!("the authorization server refused: {error}"),
        }));
    }
    AuthorizationCallback::from_redirect_url(redirect).map_err(|e| LoginError::auth("the redirect", e))
}

/// An [`Authorizer`] for a person at this machine (RFC 8252, a native app): shows the authorization URL (on
/// stderr by default; [`LoopbackBrowser::show`] to open a browser instead), then waits on the redirect URI's
/// loopback address (`http://127.0.0.1:PORT/path` or `http://localhost:PORT/path`) for the redirect.
#[derive(Clone)]
#[must_use]
pub struct LoopbackBrowser {
    show: Arc<dyn Fn(&str) + Send + Sync>,
    timeout: Duration,
}

impl fmt::Debug for LoopbackBrowser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoopbackBrowser").field("timeout", &self.timeout).finish_non_exhaustive()
    }
}

impl Default for LoopbackBrowser {
    fn default() -> Self {
        LoopbackBrowser::new()
    }
}

impl LoopbackBrowser {
    /// Prints the URL on stderr and waits up to 5 minutes.
    pub fn new() -> LoopbackBrowser {
        LoopbackBrowser {
            show: Arc::new(|url| eprintln!("To log in to the MCP server, open this address in a browser:\n  {url}")),
            timeout: Duration::from_secs(300),
        }
    }

    /// How the URL reaches the user, e.g. a function that opens a browser.
    pub fn show(mut self, show: impl Fn(&str) + Send + Sync + 'static) -> LoopbackBrowser {
        self.show = Arc::new(show);
        self
    }

    /// How long to wait for the redirect.
    pub fn timeout(mut self, timeout: Duration) -> LoopbackBrowser {
        self.timeout = timeout;
        self
    }
}

impl Authorizer for LoopbackBrowser {
    fn authorize<'a>(&'a self, url: &'a str, redirect_uri: &'a str) -> AuthorizeFuture<'a> {
        Box::pin(async move {
            let redirect = url::Url::parse(redirect_uri)
                .map_err(|e| LoginError::new(format!("the redirect URI {redirect_uri:?}: {e}")))?;
            let host = redirect.host_str().unwrap_or_default();
            let loopback = matches!(host, "localhost" | "127.0.0.1" | "[::1]");
            if redirect.scheme() != "http" || !loopback || redirect.port().is_none() {
                return Err(LoginError::new(format!(
                    "the redirect URI {redirect_uri:?} is not a loopback address with a port \
                     (write http://127.0.0.1:PORT/callback)"
                )));
            }
            let bind = match host {
                "[::1]" => format!("[::1]:{}", redirect.port().unwrap_or_default()),
                _ => format!("127.0.0.1:{}", redirect.port().unwrap_or_default()),
            };
            let listener = tokio::net::TcpListener::bind(&bind)
                .await
                .map_err(|e| LoginError::new(format!("listening on {bind} for the redirect: {e}")))?;
            (self.show)(url);
            // The redirect of this login carries the `state` its authorization URL sent; a request without it
            // (from anything else on the machine) is refused and the wait goes on.
            let state = url::Url::parse(url)
                .ok()
                .and_then(|u| u.query_pairs().find(|(k, _)| k == "state").map(|(_, v)| v.into_owned()));
            let expected = Expected { path: redirect.path().to_owned(), state };
            let wait = async {
                // Each connection is read on its own task, so one that sends nothing holds up no other; at most
                // MAX_READING at once, and a connection past that is closed unread.
                const MAX_READING: usize = 16;
                let mut reading = tokio::task::JoinSet::new();
                loop {
                    tokio::select! {
                        accepted = listener.accept() => {
                            let Ok((stream, _)) = accepted else { continue };
                            if reading.len() < MAX_READING {
                                let expected = expected.clone();
                                reading.spawn(async move { read_redirect(stream, &expected).await });
                            }
                        }
                        Some(done) = reading.join_next(), if !reading.is_empty() => {
                            if let Ok(Some(target)) = done {
                                return format!("{}://{}{}", redirect.scheme(), redirect.authority(), target);
                            }
                        }
                    }
                }
            };
            tokio::time::timeout(self.timeout, wait)
                .await
                .map_err(|_| LoginError::new(format!("no redirect reached {redirect_uri} within {:?}", self.timeout)))
        })
    }
}

/// What the redirect of one login looks like: a `GET` of the redirect URI's path whose query holds the `state` of
/// the authorization URL (when it had one) and a `code` or an `error`.
#[derive(Clone)]
struct Expected {
    path: String,
    state: Option<String>,
}

impl Expected {
    /// Whether `target` (a request target, `/path?query`) is this login's redirect, and if not, the status that
    /// says so: `404` for another path, `400` for the path without this login's answer.
    fn check(&self, target: &str) -> Result<(), &'static str> {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        if path != self.path {
            return Err("404 Not Found");
        }
        let pairs: Vec<(String, String)> =
            url::form_urlencoded::parse(query.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
        let has = |key: &str| pairs.iter().any(|(k, _)| k == key);
        let state_ok = match &self.state {
            Some(state) => pairs.iter().any(|(k, v)| k == "state" && v == state),
            None => true,
        };
        if state_ok && (has("code") || has("error")) { Ok(()) } else { Err("400 Bad Request") }
    }
}

/// Reads one HTTP request from `stream`; the request target when it is this login's redirect ([`Expected`]),
/// answered with a short page. Anything else is answered `404` or `400` and ignored.
async fn read_redirect(mut stream: tokio::net::TcpStream, expected: &Expected) -> Option<String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let read = async {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16 * 1024 {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    };
    if tokio::time::timeout(Duration::from_secs(10), read).await.is_err() {
        return None;
    }
    let head = String::from_utf8_lossy(&buf);
    let mut parts = head.lines().next().unwrap_or_default().split(' ');
    let (method, target) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let checked = if method == "GET" { expected.check(target) } else { Err("404 Not Found") };
    let (status, body) = match checked {
        Ok(()) => ("200 OK", "Logged in. You can close this window.\n"),
        Err(status @ "400 Bad Request") => (status, "This is not the answer to this login.\n"),
        Err(status) => (status, "Not found.\n"),
    };
    let answer = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(answer.as_bytes()).await;
    let _ = stream.shutdown().await;
    checked.is_ok().then(|| target.to_owned())
}

/// An [`Authorizer`] for an authorization server that approves without a person (a machine account, a test
/// server): fetches the authorization URL without following its redirect and returns the redirect's `Location`.
#[derive(Debug, Clone)]
pub struct AutoApprove {
    http: reqwest::Client,
}

impl AutoApprove {
    /// Fetches with a client of its own (no redirects followed, 30 s timeout).
    pub fn new() -> Result<AutoApprove, LoginError> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| LoginError::new(format!("building the HTTP client: {e}")))?;
        Ok(AutoApprove { http })
    }
}

impl Authorizer for AutoApprove {
    fn authorize<'a>(&'a self, url: &'a str, _redirect_uri: &'a str) -> AuthorizeFuture<'a> {
        Box::pin(async move {
            let response = self
                .http
                .get(url)
                .send()
                .await
                .map_err(|e| LoginError::new(format!("fetching the authorization URL: {e}")))?;
            let status = response.status();
            response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
                .filter(|_| status.is_redirection())
                .ok_or_else(|| {
                    LoginError::new(format!("the authorization server answered {status} without a redirect"))
                })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redirect_with_an_error_says_what_the_server_refused() {
        let e = parse_redirect("http://127.0.0.1:1/cb?error=access_denied&error_description=no&state=s").unwrap_err();
        assert_eq!(
            e.to_string(),
            "logging in to the MCP server failed: the authorization server refused: access_denied: no"
        );
        let ok = parse_redirect("http://127.0.0.1:1/cb?code=c&state=s&iss=https%3A%2F%2Fas").unwrap();
        assert_eq!((ok.code.as_str(), ok.csrf_token.as_str(), ok.issuer.as_deref()), ("c", "s", Some("https://as")));
        assert!(parse_redirect("http://127.0.0.1:1/cb?state=s").unwrap_err().auth_error().is_some());
    }

    /// A loopback browser whose redirect URI is `/callback` on a free port, and where it sends the URL it shows.
    fn browser_on_a_free_port() -> (u16, String, LoopbackBrowser, tokio::sync::oneshot::Receiver<String>) {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<String>();
        let tx = std::sync::Mutex::new(Some(tx));
        let browser = LoopbackBrowser::new().timeout(Duration::from_secs(10)).show(move |url| {
            if let Some(tx) = tx.lock().unwrap().take() {
                let _ = tx.send(url.to_owned());
            }
        });
        (port, format!("http://127.0.0.1:{port}/callback"), browser, rx)
    }

    /// Runs one login through a loopback browser on a free port against `user` (what the person's browser does,
    /// given the port and where the shown URL arrives), within 30 s. The port is free when picked but another
    /// process can take it before the browser listens; then the login is tried again on another port, and a login
    /// that fails otherwise ends the wait at once instead of leaving `user` waiting for a URL never shown.
    async fn login_through_the_browser<F, Fut>(url: &str, user: F) -> (u16, Result<String, LoginError>)
    where
        F: Fn(u16, tokio::sync::oneshot::Receiver<String>) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        for _ in 0..5 {
            let (port, redirect_uri, browser, rx) = browser_on_a_free_port();
            let attempt = async {
                let authorize = browser.authorize(url, &redirect_uri);
                let user = user(port, rx);
                tokio::pin!(authorize, user);
                tokio::select! {
                    got = &mut authorize => {
                        if got.is_ok() {
                            user.await;
                        }
                        got
                    }
                    () = &mut user => authorize.await,
                }
            };
            let got =
                tokio::time::timeout(Duration::from_secs(30), attempt).await.expect("the login ended within 30 s");
            match got {
                Err(e) if e.to_string().starts_with("listening on") => continue,
                got => return (port, got),
            }
        }
        panic!("no free loopback port in five tries");
    }

    /// A client for the person's browser that gives up rather than hang a test.
    fn browser_client() -> reqwest::Client {
        reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap()
    }

    #[tokio::test]
    async fn the_loopback_browser_takes_the_redirect_of_its_path_only() {
        let (port, got) =
            login_through_the_browser("https://as.example/authorize?x=1&state=s", |port, rx| async move {
                assert_eq!(rx.await.unwrap(), "https://as.example/authorize?x=1&state=s");
                let http = browser_client();
                let other = http.get(format!("http://127.0.0.1:{port}/favicon.ico")).send().await.unwrap();
                assert_eq!(other.status(), 404);
                let done = http.get(format!("http://127.0.0.1:{port}/callback?code=c&state=s")).send().await.unwrap();
                assert_eq!(done.status(), 200);
            })
            .await;
        assert_eq!(got.unwrap(), format!("http://127.0.0.1:{port}/callback?code=c&state=s"));
    }

    /// Anything on the machine can send a GET to the loopback port first: a bare GET of the path, a code with
    /// another state, a connection that sends nothing. None of them ends the wait; the redirect of this login
    /// (its `state`) does.
    #[tokio::test]
    async fn the_loopback_browser_waits_for_the_redirect_of_its_own_login() {
        let started = std::time::Instant::now();
        let (port, got) = login_through_the_browser("https://as.example/authorize?state=s", |port, rx| async move {
            rx.await.unwrap();
            // A connection that sends nothing and stays open must not hold up the others.
            let _silent = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
            let http = browser_client();
            for stray in ["/callback", "/callback?code=evil&state=other", "/callback?state=s"] {
                let answer = http.get(format!("http://127.0.0.1:{port}{stray}")).send().await.unwrap();
                assert_eq!(answer.status(), 400, "{stray}");
            }
            let done = http.get(format!("http://127.0.0.1:{port}/callback?code=c&state=s")).send().await.unwrap();
            assert_eq!(done.status(), 200);
        })
        .await;
        assert_eq!(got.unwrap(), format!("http://127.0.0.1:{port}/callback?code=c&state=s"));
        assert!(started.elapsed() < Duration::from_secs(5), "the silent connection held nothing up");
    }

    #[tokio::test]
    async fn the_loopback_browser_refuses_a_redirect_uri_it_cannot_listen_on() {
        let e = LoopbackBrowser::new().authorize("https://as/authorize", "https://app.example/cb").await.unwrap_err();
        assert!(e.to_string().contains("is not a loopback address with a port"), "{e}");
    }
}
