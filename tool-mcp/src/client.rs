//! Importing a remote MCP server's tools as keel tools (feature `client`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use keel_tools_core::{Executor, Registry};
//! use keel_tools_mcp::client::RemoteServer;
//!
//! let mut cmd = tokio::process::Command::new("npx");
//! cmd.args(["-y", "@modelcontextprotocol/server-everything"]);
//! let everything = RemoteServer::connect_child("everything", cmd).await?;
//! let remote = everything.import_unpinned().await?; // everything.echo, everything.get_tiny_image, ...
//! let registry = Registry::builder().tools(remote.into_definitions()).build()?;
//! let executor = Executor::new(registry.view().tag("mcp:everything").build()?)?;
//! # Ok(()) }
//! ```
//!
//! Each remote tool becomes a [`ToolDefinition`](keel_tools_core::definition::ToolDefinition) named
//! `<namespace>.<tool>` ([`crate::names`]): two servers imported under two namespaces cannot collide with each other or
//! with local tools. Its schemas are the server's `tools/list` entry: the executor validates arguments against
//! `inputSchema` *before* forwarding (an invalid call never reaches the server), and results against `outputSchema`
//! when there is one (`invalid_tool_output` otherwise). A tool without `outputSchema` returns its content blocks as a
//! [`Content`](keel_tools_core::content::Content) value, so serving the registry again over MCP passes them through
//! unchanged. Each definition is tagged `mcp` and `mcp:<namespace>` (for views), its version is the server's
//! `serverInfo.version` when that reads `MAJOR.MINOR[.PATCH]` (else `1.0`), and its description is the remote's.
//!
//! Each definition holds its own [`Forwarder`] (shared by nothing else), so per-tool limits and metrics live with
//! the tool in the registry. The forwarder sends `tools/call` with the remote's original name, maps the outcome
//! ([`crate::render::remote_outcome`]) and cancels the remote call (`notifications/cancelled`) when the local call
//! is cancelled or times out. The remote's progress and log notifications are not relayed to the local call.
//!
//! Both protocol eras: [`RemoteServer::connect`] first asks `server/discover` (protocol 2026-07-28, stateless: every
//! request carries its own `_meta`), and falls back to the `initialize` handshake of 2025-11-25 when the server does
//! not know it (an error, or no answer within 10 seconds). [`RemoteServer::protocol_version`] says which was agreed.
//!
//! Effects come from the remote's annotations unless overridden ([`Importer::effect`]): `readOnlyHint: true` is
//! `read`, `destructiveHint: false` is `write`, anything else `destructive` (MCP's defaults). Annotations are hints
//! from the server you chose to connect to; [`Importer::trust_annotations`]`(false)` treats every tool as
//! `destructive` unless overridden, so nothing runs without an approval.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
#[cfg(feature = "http")]
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, FormElicitationCapability, Implementation, InitializeRequestParams, ProtocolVersion, Tool,
};
use rmcp::service::{ClientServiceExt, RunningService, ServiceError};
use rmcp::{ClientHandler, ClientLifecycleMode, Peer, RoleClient};
use serde_json::Value;

use crate::names::{self, NameMappingError};

mod error;
mod import;
#[cfg(feature = "oauth")]
pub mod oauth;
pub mod pin;

pub use error::{ConnectError, ImportError, ImportProblem};
use import::ForwarderInner;
pub use import::{Forwarder, Importer, RemoteTools};
pub use pin::{Drift, DriftKind, Pin, Pins};

/// The rmcp client handler of a connection.
struct KeelClient {
    info: InitializeRequestParams,
    elicitation: Option<Arc<dyn Elicitation>>,
    /// Counts the server's `notifications/tools/list_changed`, for pinned imports to list the tools again.
    list_changed: Arc<tokio::sync::watch::Sender<u64>>,
}

impl ClientHandler for KeelClient {
    fn get_info(&self) -> InitializeRequestParams {
        self.info.clone()
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        match &self.elicitation {
            Some(handler) => handler.elicit(request).await,
            None => Ok(ElicitResult::new(ElicitationAction::Decline)),
        }
    }

    async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        self.list_changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// The future of an [`Elicitation`].
pub type ElicitFuture<'a> = std::pin::Pin<Box<dyn Future<Output = Result<ElicitResult, rmcp::ErrorData>> + Send + 'a>>;

/// Answers a remote server's requests for input (`elicitation/create`, or an `input_required` round of
/// 2026-07-28 that asks for an elicitation) while a forwarded call runs; see [`HttpConnect::elicitation`].
/// Without one, the connection does not offer elicitation, and a request that comes anyway is declined.
pub trait Elicitation: Send + Sync + 'static {
    /// The answer to `request`.
    fn elicit(&self, request: ElicitRequestParams) -> ElicitFuture<'_>;
}

/// An [`Elicitation`] for an unattended forwarder: accepts a form with the defaults its schema proposes, and
/// declines a form that requires a field without a default, and every URL elicitation.
#[derive(Debug, Clone, Copy, Default)]
pub struct AcceptDefaults;

impl Elicitation for AcceptDefaults {
    fn elicit(&self, request: ElicitRequestParams) -> ElicitFuture<'_> {
        Box::pin(async move {
            let ElicitRequestParams::FormElicitationParams { requested_schema, .. } = request else {
                return Ok(ElicitResult::new(ElicitationAction::Decline));
            };
            let schema = serde_json::to_value(&requested_schema).unwrap_or_default();
            let mut content = serde_json::Map::new();
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    if let Some(default) = property.get("default") {
                        content.insert(name.clone(), default.clone());
                    }
                }
            }
            let required = schema.get("required").and_then(Value::as_array).into_iter().flatten();
            if required.filter_map(Value::as_str).any(|name| !content.contains_key(name)) {
                return Ok(ElicitResult::new(ElicitationAction::Decline));
            }
            Ok(ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content)))
        })
    }
}

/// The protocol era a [`RemoteServer`] speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Era {
    /// `server/discover` first (2026-07-28, stateless); the `initialize` session when the server does not know it,
    /// or does not answer it within 10 seconds. The default.
    #[default]
    Auto,
    /// The `initialize` session of 2025-11-25, without probing.
    Session,
    /// Stateless 2026-07-28 requests only: a server that does not answer `server/discover` fails the connection.
    Stateless,
}

struct Connection {
    namespace: String,
    /// What the server is: its URL, its command line, or `mcp:` and the name it gave (see
    /// [`RemoteServer::identity`]).
    identity: String,
    list_changed: Arc<tokio::sync::watch::Sender<u64>>,
    peer: Peer<RoleClient>,
    version: String,
    running: Mutex<Option<Arc<RunningService<RoleClient, KeelClient>>>>,
    /// How the connection logs in again, or steps up its scopes, when the server refuses a request.
    #[cfg(feature = "oauth")]
    login: Option<Arc<oauth::LoginSession>>,
}

impl Connection {
    /// `tools/list`, every page; on a protected server, a refusal is answered once (a new login or a step-up) and
    /// the list asked again.
    async fn list_tools(&self) -> Result<Vec<Tool>, ServiceError> {
        let first = self.peer.list_all_tools().await;
        #[cfg(feature = "oauth")]
        if let Err(e) = &first
            && self.answer(e).await
        {
            return self.peer.list_all_tools().await;
        }
        first
    }

    /// `tools/call`, through its `input_required` rounds (2026-07-28: each round sent again with a new request
    /// id, the server's `requestState` echoed unchanged, omitted when the server sent none); on a protected
    /// server, a refusal is answered once (a new login or a step-up) and the call sent again. The call was refused
    /// before it ran, so sending it again runs it at most once.
    async fn call_tool(&self, params: CallToolRequestParams) -> Result<rmcp::model::CallToolResult, ServiceError> {
        let running = self.running.lock().ok().and_then(|r| r.clone()).ok_or(ServiceError::TransportClosed)?;
        #[cfg(feature = "oauth")]
        let again = self.login.is_some().then(|| params.clone());
        let first = running.call_tool(params).await;
        #[cfg(feature = "oauth")]
        if let (Err(e), Some(params)) = (&first, again)
            && self.answer(e).await
        {
            return running.call_tool(params).await;
        }
        first
    }

    /// Whether the refusal `error` was answered (logged in again, or scopes stepped up), so that the request is
    /// worth sending again.
    #[cfg(feature = "oauth")]
    async fn answer(&self, error: &ServiceError) -> bool {
        let (Some(login), Some(challenge)) = (&self.login, error.auth_challenge()) else { return false };
        match login.answer(challenge).await {
            Ok(answered) => answered,
            Err(e) => {
                tracing::warn!(server = %self.namespace, error = %e, "the MCP server refused a request; logging in again failed");
                false
            }
        }
    }
}

/// A connection to one MCP server, imported under one namespace. Cheap to clone; the connection closes when the
/// last clone and the last imported definition are dropped, or on [`RemoteServer::close`].
#[derive(Clone)]
pub struct RemoteServer {
    conn: Arc<Connection>,
}

impl fmt::Debug for RemoteServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteServer").field("namespace", &self.conn.namespace).finish_non_exhaustive()
    }
}

impl RemoteServer {
    /// Connects over any rmcp client transport: `server/discover` for a 2026-07-28 server, else the `initialize`
    /// handshake (see the module docs; [`Era::Auto`]). `namespace` must be one keel name segment (`everything`,
    /// `files`); the tools become `<namespace>.<tool>`.
    pub async fn connect<T, E, A>(namespace: &str, transport: T) -> Result<RemoteServer, ConnectError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        RemoteServer::connect_with(namespace, transport, Era::Auto).await
    }

    /// Like [`RemoteServer::connect_with`], for a connection that logs in.
    #[cfg(feature = "oauth")]
    async fn connect_logged_in<T, E, A>(
        namespace: &str,
        identity: &str,
        transport: T,
        era: Era,
        elicitation: Option<Arc<dyn Elicitation>>,
        login: Arc<oauth::LoginSession>,
    ) -> Result<RemoteServer, ConnectError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let server = RemoteServer::connect_inner(namespace, transport, era, elicitation, Some(identity)).await?;
        let mut conn = Arc::into_inner(server.conn).expect("a new connection has no other owner");
        conn.login = Some(login);
        Ok(RemoteServer { conn: Arc::new(conn) })
    }

    /// Like [`RemoteServer::connect`], in the protocol era `era`.
    pub async fn connect_with<T, E, A>(namespace: &str, transport: T, era: Era) -> Result<RemoteServer, ConnectError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        RemoteServer::connect_inner(namespace, transport, era, None, None).await
    }

    async fn connect_inner<T, E, A>(
        namespace: &str,
        transport: T,
        era: Era,
        elicitation: Option<Arc<dyn Elicitation>>,
        identity: Option<&str>,
    ) -> Result<RemoteServer, ConnectError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        if !names::is_valid_namespace(namespace) {
            return Err(ConnectError::new(NameMappingError::InvalidNamespace { namespace: namespace.to_owned() }));
        }
        let mut capabilities = ClientCapabilities::default();
        if elicitation.is_some() {
            let mut elicit = ElicitationCapability::new();
            elicit.form = Some(FormElicitationCapability::default());
            capabilities.elicitation = Some(elicit);
        }
        let info = InitializeRequestParams::new(capabilities, Implementation::new("keel", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE);
        let list_changed = Arc::new(tokio::sync::watch::Sender::new(0));
        let client = KeelClient { info, elicitation, list_changed: list_changed.clone() };
        let lifecycle = match era {
            Era::Auto => ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
            },
            Era::Session => ClientLifecycleMode::Initialize,
            Era::Stateless => ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] },
        };
        let running = client.serve_with_lifecycle(transport, lifecycle).await.map_err(ConnectError::new)?;
        let peer = running.peer().clone();
        let version = peer
            .peer_info()
            .and_then(|i| i.server_info.as_ref().map(|s| s.version.clone()))
            .filter(|v| keel_tools_core::name::is_valid_version(v))
            .unwrap_or_else(|| "1.0".to_owned());
        let identity = identity.map_or_else(
            || {
                let name = peer.peer_info().and_then(|i| i.server_info.as_ref().map(|s| s.name.clone()));
                format!("mcp:{}", name.unwrap_or_default())
            },
            str::to_owned,
        );
        Ok(RemoteServer {
            conn: Arc::new(Connection {
                namespace: namespace.to_owned(),
                identity,
                list_changed,
                peer,
                version,
                running: Mutex::new(Some(Arc::new(running))),
                #[cfg(feature = "oauth")]
                login: None,
            }),
        })
    }

    /// Spawns `command` (an MCP server speaking stdio) and connects to it. The child's stderr is inherited; it is
    /// killed when the connection closes.
    ///
    /// A server slow to start (an `npx -y` that downloads its package first) may answer `server/discover` only
    /// after the 10-second probe gave up on it and sent `initialize`; the late answer fails that handshake. The
    /// command is then started once more, with its program, arguments, environment and directory (its stdio
    /// settings are the transport's, stderr inherited), and the server, now quicker to start, is asked again.
    pub async fn connect_child(
        namespace: &str,
        command: tokio::process::Command,
    ) -> Result<RemoteServer, ConnectError> {
        let identity = command_line(command.as_std());
        let again = respawned(command.as_std());
        let transport = rmcp::transport::TokioChildProcess::new(command).map_err(ConnectError::new)?;
        let first = RemoteServer::connect_inner(namespace, transport, Era::Auto, None, Some(&identity)).await;
        match first {
            Err(e) if e.is_late_discover_answer() => {
                tracing::debug!(server = %namespace, error = %e, "a late answer to server/discover; starting the server again");
                let transport = rmcp::transport::TokioChildProcess::new(again).map_err(ConnectError::new)?;
                RemoteServer::connect_inner(namespace, transport, Era::Auto, None, Some(&identity)).await
            }
            other => other,
        }
    }

    /// Connects to a Streamable HTTP server at `url` (e.g. `http://127.0.0.1:8080/mcp`, or `https://...` with
    /// the `rustls` feature, on by default), with the settings of [`RemoteServer::http`]'s defaults.
    ///
    /// The HTTP client sets `TCP_NODELAY` on its connections (a request is never held back waiting for the
    /// server's ACK of the previous one), keeps idle connections for reuse for 30 s, and follows no redirects.
    #[cfg(feature = "http")]
    pub async fn connect_http(namespace: &str, url: &str) -> Result<RemoteServer, ConnectError> {
        RemoteServer::http(url).connect(namespace).await
    }

    /// A Streamable HTTP connection to `url` to configure (extra root certificates for `https://`), then
    /// [`HttpConnect::connect`].
    ///
    /// ```no_run
    /// # async fn demo(ca_pem: &str) -> Result<(), Box<dyn std::error::Error>> {
    /// use keel_tools_mcp::client::RemoteServer;
    /// let files = RemoteServer::http("https://mcp.internal:8443/mcp").add_root_certificate(ca_pem).connect("files").await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "http")]
    pub fn http(url: impl Into<String>) -> HttpConnect {
        HttpConnect {
            url: url.into(),
            roots: Vec::new(),
            era: Era::Auto,
            elicitation: None,
            #[cfg(feature = "oauth")]
            login: None,
        }
    }

    /// The protocol revision agreed with the server (`2026-07-28` when it answered `server/discover`).
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.conn.peer.peer_info().map(|i| i.protocol_version.clone())
    }

    /// The namespace the tools are imported under.
    pub fn namespace(&self) -> &str {
        &self.conn.namespace
    }

    /// What the server is, as its tools' digests ([`pin::tool_digest`]) cover it: the URL of a Streamable HTTP
    /// server, the command line of a child process (program and arguments, each quoted when it holds a space), or,
    /// over another transport, `mcp:` and the name the server gave in its handshake.
    pub fn identity(&self) -> &str {
        &self.conn.identity
    }

    /// The rmcp peer, for anything beyond tools.
    pub fn peer(&self) -> &Peer<RoleClient> {
        &self.conn.peer
    }

    /// The server's `tools/list`, every page.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, ServiceError> {
        self.conn.list_tools().await
    }

    /// Imports every tool as the server lists it now, unchecked, with the default settings: a tool the server
    /// changes later (its description, its schema) reaches the model as it is listed at the next import. For a
    /// server you control; otherwise import it pinned ([`Importer::pinned`], [`pin`]). See [`Importer`].
    pub async fn import_unpinned(&self) -> Result<RemoteTools, ImportError> {
        self.importer().import().await
    }

    /// Imports with settings: effect overrides, trust in annotations, a timeout.
    pub fn importer(&self) -> Importer {
        Importer {
            server: self.clone(),
            effects: BTreeMap::new(),
            trust_annotations: true,
            timeout: None,
            pins: None,
            strict: false,
        }
    }

    /// A forwarder for remote tool `origin` (its MCP name) under the keel name `name`, without asking the server's
    /// `tools/list`: for callers that describe the tool themselves, such as a catalogue row that supplies its own
    /// schemas. `structured` says whether the tool has an `outputSchema`: its result is then the remote's
    /// `structuredContent`, otherwise its content blocks as a [`Content`](keel_tools_core::content::Content) value.
    ///
    /// Each call makes a new forwarder (with its own counters); hold on to it to keep per-tool state. The
    /// connection is shared with every other forwarder of this server.
    pub fn forwarder(&self, name: impl Into<String>, origin: impl Into<String>, structured: bool) -> Arc<Forwarder> {
        self.pinned_forwarder(name.into(), origin.into(), structured, None)
    }

    /// A forwarder for remote tool `origin` like [`RemoteServer::forwarder`], pinned to `digest`
    /// ([`pin::tool_digest`]): the server's `tools/list` must hold the tool with that digest now, and a change
    /// announced later (`tools/list_changed`) withholds it ([`Forwarder::withheld`]): its calls are refused and
    /// never sent. For callers that describe the tool themselves but approved the remote's entry, such as a
    /// catalogue row that carries the digest it was approved with.
    pub async fn pinned(
        &self,
        name: impl Into<String>,
        origin: impl Into<String>,
        structured: bool,
        digest: &str,
    ) -> Result<Arc<Forwarder>, PinnedError> {
        let origin = origin.into();
        let tools = self.list_tools().await.map_err(|e| PinnedError::ListFailed(Arc::new(e)))?;
        let namespace = &self.conn.namespace;
        let Some(tool) = tools.iter().find(|t| t.name == origin.as_str()) else {
            return Err(PinnedError::Drift(Drift::between(namespace, &origin, Some((digest, None)), None)));
        };
        let (entry, current) = (pin::listed_entry(tool), pin::tool_digest(self.identity(), tool));
        if current != digest {
            return Err(PinnedError::Drift(Drift::between(
                namespace,
                &origin,
                Some((digest, None)),
                Some((&current, &entry)),
            )));
        }
        let state = Arc::new(pin::PinState {
            namespace: self.conn.namespace.clone(),
            identity: self.conn.identity.clone(),
            imported: BTreeMap::from([(origin.clone(), (current, entry))]),
            drifts: Mutex::new(BTreeMap::new()),
            sender: tokio::sync::broadcast::channel(16).0,
            only: Some(origin.clone()),
        });
        import::follow_list_changed(self, &state);
        Ok(self.pinned_forwarder(name.into(), origin, structured, Some(state)))
    }

    fn pinned_forwarder(
        &self,
        name: String,
        origin: String,
        structured: bool,
        pins: Option<Arc<pin::PinState>>,
    ) -> Arc<Forwarder> {
        Arc::new(Forwarder {
            inner: Arc::new(ForwarderInner {
                conn: self.conn.clone(),
                name,
                origin,
                structured,
                calls: AtomicU64::new(0),
                failures: AtomicU64::new(0),
                pins,
            }),
        })
    }

    /// Whether the connection is closed ([`RemoteServer::close`], or the transport ended): forwarders of a closed
    /// connection answer `tool_internal_error`.
    pub fn is_closed(&self) -> bool {
        let closed = self.conn.running.lock().map_or(true, |r| r.is_none());
        closed || self.conn.peer.is_transport_closed()
    }

    /// Closes the connection (the child process is stopped). Imported tools answer `tool_internal_error`
    /// afterwards.
    pub async fn close(&self) {
        let running = self.conn.running.lock().ok().and_then(|mut r| r.take());
        if let Some(running) = running {
            // A call still in flight holds the service too: it is cancelled, and ends with the call.
            match Arc::try_unwrap(running) {
                Ok(running) => {
                    let _ = running.cancel().await;
                }
                Err(running) => running.cancellation_token().cancel(),
            }
        }
    }
}

/// Why [`RemoteServer::pinned`] made no forwarder.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum PinnedError {
    /// `tools/list` failed: the SDK's error (an [`rmcp::service::ServiceError`]).
    ListFailed(Arc<dyn std::error::Error + Send + Sync + 'static>),
    /// The server lists the tool with another digest, or not at all.
    Drift(Drift),
}

impl fmt::Display for PinnedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinnedError::ListFailed(e) => write!(f, "tools/list failed: {e}"),
            PinnedError::Drift(d) => d.fmt(f),
        }
    }
}

impl std::error::Error for PinnedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PinnedError::ListFailed(e) => Some(&**e),
            PinnedError::Drift(_) => None,
        }
    }
}

/// A Streamable HTTP connection being configured; see [`RemoteServer::http`] (feature `http`).
///
/// With the `rustls` feature (on by default) `https://` URLs are accepted. Each connection's HTTP client has a
/// TLS configuration of its own: rustls' `aws-lc-rs` provider (reqwest's default), given to this client only (nothing is installed
/// process-wide, so other rustls or reqwest users in the binary keep their own choice), and the roots compiled in
/// from `webpki-roots` (Mozilla's), plus [`HttpConnect::add_root_certificate`]. webpki-roots rather than the
/// platform's store: the same roots on every machine, including containers without a CA bundle, where the
/// platform verifier cannot be built at all; a private CA is added explicitly. A certificate that does not chain
/// to these roots, or that names another host, fails [`HttpConnect::connect`] with a [`ConnectError`] that names
/// the certificate problem.
#[cfg(feature = "http")]
#[derive(Clone)]
#[must_use]
pub struct HttpConnect {
    url: String,
    #[cfg_attr(not(feature = "rustls"), allow(dead_code))]
    roots: Vec<Vec<u8>>,
    era: Era,
    elicitation: Option<Arc<dyn Elicitation>>,
    #[cfg(feature = "oauth")]
    login: Option<oauth::Login>,
}

#[cfg(feature = "http")]
impl fmt::Debug for HttpConnect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("HttpConnect");
        d.field("url", &self.url).field("roots", &self.roots.len()).field("era", &self.era);
        d.field("elicitation", &self.elicitation.is_some());
        #[cfg(feature = "oauth")]
        d.field("login", &self.login);
        d.finish()
    }
}

#[cfg(feature = "http")]
impl HttpConnect {
    /// Trusts the CA certificate(s) in `pem` (PEM text, one or more `CERTIFICATE` blocks) for `https://`, in
    /// addition to the built-in Mozilla roots: for a server whose certificate a private CA signed. Checked by
    /// [`HttpConnect::connect`], which fails when `pem` holds no certificate. Feature `rustls`.
    #[cfg(feature = "rustls")]
    pub fn add_root_certificate(mut self, pem: impl AsRef<[u8]>) -> Self {
        self.roots.push(pem.as_ref().to_vec());
        self
    }

    /// Offers elicitation to the server, answered by `handler` (e.g. [`AcceptDefaults`]). Default: not offered.
    pub fn elicitation(mut self, handler: impl Elicitation) -> Self {
        self.elicitation = Some(Arc::new(handler));
        self
    }

    /// The protocol era to speak. Default: [`Era::Auto`].
    pub fn era(mut self, era: Era) -> Self {
        self.era = era;
        self
    }

    /// Logs in to a server that is an OAuth 2.1 protected resource, when it asks (a `401` or `403` with a
    /// `WWW-Authenticate` challenge): at connection, and again whenever a later request is refused. See
    /// [`oauth`]. Feature `oauth`.
    #[cfg(feature = "oauth")]
    pub fn login(mut self, login: oauth::Login) -> Self {
        self.login = Some(login);
        self
    }

    /// Connects under `namespace` (see [`RemoteServer::connect`]).
    pub async fn connect(self, namespace: &str) -> Result<RemoteServer, ConnectError> {
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        if self.url.trim_start().starts_with("https://") && !cfg!(feature = "rustls") {
            return Err(ConnectError::new(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                format!("{} needs HTTPS; enable keel-tools-mcp's `rustls` feature", self.url),
            )));
        }
        let builder = reqwest::Client::builder()
            .tcp_nodelay(true)
            .pool_idle_timeout(std::time::Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none());
        #[cfg(feature = "rustls")]
        let builder = builder.tls_backend_preconfigured(tls_config(&self.roots)?);
        let client = builder.build().map_err(ConnectError::new)?;
        let config = StreamableHttpClientTransportConfig::with_uri(self.url.clone());
        #[cfg(feature = "oauth")]
        if let Some(login) = self.login {
            let own_client = !self.roots.is_empty();
            return connect_logged_in(namespace, &self.url, self.era, self.elicitation, login, client, own_client)
                .await;
        }
        let transport = rmcp::transport::StreamableHttpClientTransport::with_client(client.clone(), config);
        match RemoteServer::connect_inner(namespace, transport, self.era, self.elicitation, Some(&self.url)).await {
            Ok(server) => Ok(server),
            Err(e) => Err(transport_cause(&client, &self.url).await.unwrap_or(e)),
        }
    }
}

/// Connects with `login`: the first attempt with the stored token (or none); a refusal with a challenge is
/// answered by logging in, and the connection made again once.
#[cfg(feature = "oauth")]
async fn connect_logged_in(
    namespace: &str,
    url: &str,
    era: Era,
    elicitation: Option<Arc<dyn Elicitation>>,
    login: oauth::Login,
    client: reqwest::Client,
    own_client_for_oauth: bool,
) -> Result<RemoteServer, ConnectError> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let oauth_client = own_client_for_oauth.then(|| client.clone());
    let session =
        oauth::LoginSession::new(url, login, client.clone(), oauth_client).await.map_err(ConnectError::new)?;
    let session = Arc::new(session);
    let transport = || {
        let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
        rmcp::transport::StreamableHttpClientTransport::with_client(session.client.clone(), config)
    };
    let first =
        RemoteServer::connect_logged_in(namespace, url, transport(), era, elicitation.clone(), session.clone()).await;
    let challenge = match &first {
        Ok(_) => return first,
        Err(e) => match e.auth_challenge() {
            Some(challenge) => challenge.to_owned(),
            None => return Err(transport_cause(&client, url).await.unwrap_or_else(|| first.unwrap_err())),
        },
    };
    session.log_in(Some(&challenge)).await.map_err(ConnectError::new)?;
    RemoteServer::connect_logged_in(namespace, url, transport(), era, elicitation, session).await
}

/// A new command of `command`'s program, arguments, environment and working directory.
fn respawned(command: &std::process::Command) -> tokio::process::Command {
    let mut again = tokio::process::Command::new(command.get_program());
    again.args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => again.env(key, value),
            None => again.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        again.current_dir(dir);
    }
    again
}

/// A command line as one string: the program and its arguments, each quoted (Rust's `{:?}`) when it holds a
/// space, a quote or nothing.
fn command_line(command: &std::process::Command) -> String {
    let word = |w: &std::ffi::OsStr| {
        let w = w.to_string_lossy();
        if w.is_empty() || w.contains([' ', '"', '\'', '\\']) { format!("{w:?}") } else { w.into_owned() }
    };
    std::iter::once(word(command.get_program())).chain(command.get_args().map(word)).collect::<Vec<_>>().join(" ")
}

/// The transport failure behind a failed connection, if there is one. The SDK keeps only the text of the HTTP
/// client's error, so a refused certificate would read "error sending request"; one more request (`HEAD`, its
/// answer not read) finds reqwest's error again, with its source chain. `None` when the server answers at all: the
/// failure was then in MCP, and the SDK's error says so.
#[cfg(feature = "http")]
async fn transport_cause(client: &reqwest::Client, url: &str) -> Option<ConnectError> {
    let probe = client.head(url).timeout(Duration::from_secs(10)).send().await;
    match probe {
        Err(e) if e.is_connect() || e.is_request() => Some(ConnectError::new(e)),
        _ => None,
    }
}

/// The TLS configuration of one HTTP client: keel-tools-tls's, Mozilla's roots plus `extra` (PEM).
#[cfg(all(feature = "http", feature = "rustls"))]
fn tls_config(extra: &[Vec<u8>]) -> Result<rustls::ClientConfig, ConnectError> {
    keel_tools_tls::client_config(extra).map_err(ConnectError::new)
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use keel_tools_core::definition::{DefinitionError, ToolDefinition};

    use super::import::ForwardError;
    use super::*;

    #[tokio::test]
    async fn a_child_that_cannot_be_spawned_keeps_the_io_error() {
        let cmd = tokio::process::Command::new("/nonexistent/keel-test-no-such-mcp-server");
        let e = RemoteServer::connect_child("files", cmd).await.unwrap_err();
        let io = e.source().and_then(|s| s.downcast_ref::<std::io::Error>()).expect("the io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
        assert_eq!(e.to_string(), format!("connecting to the MCP server failed: {io}"));
        let copy = e.clone();
        assert!(copy.source().is_some_and(|s| s.is::<std::io::Error>()));
    }

    #[tokio::test]
    async fn a_namespace_that_is_no_segment_keeps_the_name_mapping_error() {
        let e = RemoteServer::connect("Not A Segment", (tokio::io::empty(), tokio::io::sink())).await.unwrap_err();
        let name = e.source().and_then(|s| s.downcast_ref::<NameMappingError>()).expect("the NameMappingError");
        assert_eq!(name, &NameMappingError::InvalidNamespace { namespace: "Not A Segment".into() });
    }

    #[test]
    fn import_problems_keep_their_errors() {
        let list = ImportProblem::ListFailed(Arc::new(ServiceError::TransportClosed));
        assert_eq!(list.to_string(), "tools/list failed: Transport closed");
        let service = list.source().and_then(|s| s.downcast_ref::<ServiceError>()).expect("the ServiceError");
        assert!(matches!(service, ServiceError::TransportClosed));

        let definition = ToolDefinition::builder("Not A Name").build().unwrap_err();
        let text = definition.to_string();
        let invalid = ImportProblem::InvalidDefinition { origin: "x".into(), source: Arc::new(definition) };
        assert_eq!(invalid.to_string(), format!("MCP tool \"x\": {text}"));
        assert!(invalid.source().is_some_and(|s| s.is::<DefinitionError>()));

        let unmappable = ImportProblem::Unmappable(NameMappingError::Empty { origin: "--".into() });
        assert!(unmappable.source().is_some_and(|s| s.is::<NameMappingError>()));
        assert!(ImportProblem::UnknownOverride("o".into()).source().is_none());

        let e = ImportError { namespace: "ns".into(), problems: vec![list.clone(), invalid.clone()] };
        let first = e.source().and_then(|s| s.downcast_ref::<ImportProblem>()).expect("the first problem");
        assert_eq!(first, &list);
        assert!(first.source().is_some_and(|s| s.is::<ServiceError>()));
        assert!(ImportError { namespace: "ns".into(), problems: Vec::new() }.source().is_none());
    }

    #[test]
    fn import_problems_are_equal_when_their_errors_read_the_same() {
        let closed = || ImportProblem::ListFailed(Arc::new(ServiceError::TransportClosed));
        assert_eq!(closed(), closed());
        assert_eq!(closed(), closed().clone());
        assert_ne!(closed(), ImportProblem::ListFailed(Arc::new(ServiceError::UnexpectedResponse)));
        assert_ne!(closed(), ImportProblem::UnknownOverride("Transport closed".into()));
    }

    #[test]
    fn a_failed_forward_keeps_the_sdks_error() {
        let e = ForwardError { tool: "files.read".into(), source: ServiceError::TransportClosed };
        assert_eq!(e.to_string(), "forwarding to files.read failed: Transport closed");
        assert!(e.source().and_then(|s| s.downcast_ref::<ServiceError>()).is_some());
    }
}
