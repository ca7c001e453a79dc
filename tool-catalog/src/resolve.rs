//! Resolution: from a row (a recipe) to a definition, in a fixed order. Nothing here evaluates anything: a
//! local row is looked up among the compiled tools, a remote row gets a forwarder over an MCP connection.

use std::collections::{HashMap, HashSet};
#[cfg(feature = "mcp")]
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use keel_tools_core::definition::DynHandler;
use keel_tools_core::definition::{Effect, ToolDefinition};
use keel_tools_core::{CallContext, Executor, ToolError, ToolView};
#[cfg(feature = "mcp")]
use keel_tools_mcp::{Forwarder, RemoteServer};
use serde_json::Value;

use crate::error::{RowError, RowRef};
use crate::locator::{self, Endpoint, LocalTarget, RustPath};
use crate::lookup::{Lookup, ToolLookup, module_of};
use crate::narrow::check_narrows;
use crate::row::{Kind, ToolRow};

/// The namespace remote connections are opened under (forwarders report it; names come from the rows).
#[cfg(feature = "mcp")]
const NAMESPACE: &str = "catalog";

/// A row resolved into a tool.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Resolved {
    /// A local row: the compiled tool it names, and what the view serves.
    Local {
        /// The registry's own definition of the compiled tool (the same `Arc`, not a copy).
        target: Arc<ToolDefinition>,
        /// What the view holds: `target` itself when the row keeps the compiled contract (name, description,
        /// schema, effect), else a definition derived from it that shares its handler (see
        /// [`ToolDefinition::derived`]).
        definition: Arc<ToolDefinition>,
    },
    /// A remote row: its forwarder (the same instance for as long as the row and its connection are unchanged)
    /// and the definition built from the row's own schemas around it (feature `mcp`).
    #[cfg(feature = "mcp")]
    Remote {
        /// The forwarder that sends `tools/call` with the row's origin name.
        forwarder: Arc<Forwarder>,
        /// The definition the view holds; its handler is `forwarder`.
        definition: Arc<ToolDefinition>,
    },
}

impl Resolved {
    /// The definition a view holds for the row.
    pub fn definition(&self) -> &Arc<ToolDefinition> {
        match self {
            Resolved::Local { definition, .. } => definition,
            #[cfg(feature = "mcp")]
            Resolved::Remote { definition, .. } => definition,
        }
    }
}

/// The allowlists, checked before any lookup or connection.
#[derive(Debug, Clone, Default)]
pub(crate) struct Policy {
    pub(crate) modules: Vec<RustPath>,
    pub(crate) http_origins: Vec<String>,
    pub(crate) stdio_commands: Vec<Vec<String>>,
}

impl Policy {
    fn module_allowed(&self, path: &RustPath) -> bool {
        self.modules.iter().any(|p| path.starts_with(p))
    }

    fn endpoint_allowed(&self, endpoint: &Endpoint) -> bool {
        match endpoint {
            Endpoint::Http { origin, .. } => self.http_origins.iter().any(|o| o == origin),
            Endpoint::Stdio { argv } => self.stdio_commands.iter().any(|c| c == argv),
        }
    }

    fn module_list(&self) -> Vec<String> {
        self.modules.iter().map(ToString::to_string).collect()
    }
}

/// Cache key of a row: its scope and name.
pub(crate) type RowKey = (Option<String>, String);

#[cfg(feature = "mcp")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct ForwarderKey {
    tenant: Option<String>,
    name: String,
    endpoint: Endpoint,
    origin: String,
    structured: bool,
    /// The digest the row pins its tool to (`extra.digest`), if any.
    digest: Option<String>,
}

struct CachedDef {
    row: ToolRow,
    /// The address of the handler's owner (compiled target or forwarder) it was built around.
    handler: usize,
    def: Arc<ToolDefinition>,
}

#[cfg(feature = "mcp")]
struct Connection {
    id: u64,
    server: RemoteServer,
}

#[derive(Default)]
struct Caches {
    defs: HashMap<RowKey, CachedDef>,
    #[cfg(feature = "mcp")]
    forwarders: HashMap<ForwarderKey, (u64, Arc<Forwarder>)>,
}

/// Resolution state shared by every view of one catalogue.
pub(crate) struct Resolver {
    pub(crate) policy: Policy,
    lookup: Arc<dyn ToolLookup>,
    #[cfg_attr(not(feature = "mcp"), allow(dead_code, reason = "remote rows are connected with `mcp` only"))]
    connect_timeout: Duration,
    caches: Mutex<Caches>,
    #[cfg(feature = "mcp")]
    connections: tokio::sync::Mutex<HashMap<Endpoint, Connection>>,
    #[cfg(feature = "mcp")]
    next_connection: AtomicU64,
}

/// A handler for definitions built only to be checked (never run).
struct Unreachable;

impl DynHandler for Unreachable {
    fn call(&self, _: Value, _: CallContext) -> keel_tools_core::definition::BoxFuture<Result<Value, ToolError>> {
        Box::pin(async { Err(ToolError::internal(std::io::Error::other("a check-only definition was called"))) })
    }
}

fn bad(row: &RowRef, column: &'static str, reason: impl Into<String>) -> RowError {
    RowError::BadRow { row: row.clone(), column, reason: reason.into(), source: None }
}

/// `bad_row` found by another component: its error is the source.
fn bad_from(
    row: &RowRef,
    column: &'static str,
    reason: impl Into<String>,
    source: impl std::error::Error + Send + Sync + 'static,
) -> RowError {
    RowError::BadRow { row: row.clone(), column, reason: reason.into(), source: Some(Arc::new(source)) }
}

/// Checks that `def`'s schemas compile for the executor, so that one row cannot fail a whole view's executor.
///
/// The state a tool takes (`State<T>`) is not the row's to give: the executor the catalogue builds for a view
/// ([`CatalogBuilder::executor`](crate::CatalogBuilder::executor)) holds it, and that build names a tool whose
/// state is missing. A `missing_state` here, where the check's executor holds none, is no fault of the row.
fn compiles(row: &RowRef, def: &Arc<ToolDefinition>) -> Result<(), RowError> {
    use keel_tools_core::executor::ExecutorProblem;

    let Err(e) = Executor::new(ToolView::new(vec![def.clone()])) else { return Ok(()) };
    let Some(first) = e.problems().iter().find(|p| !matches!(p, ExecutorProblem::MissingState { .. })) else {
        return Ok(());
    };
    let detail = match first {
        ExecutorProblem::Schema { problem, .. } => problem.clone(),
        _ => e.to_string(),
    };
    Err(bad_from(row, "input_schema", format!("does not compile as a JSON Schema ({detail})"), e))
}

/// What every row must satisfy whatever its kind; returns the parsed kind and effect.
fn check_data(r: &RowRef, row: &ToolRow) -> Result<(Kind, Effect), RowError> {
    if let Err(e) = keel_tools_core::name::validate(&row.name) {
        return Err(bad_from(r, "name", e.to_string(), e));
    }
    if row.tenant.as_deref() == Some("") {
        return Err(bad(r, "tenant", "is empty; use NULL for a row every tenant sees"));
    }
    if row.description.trim().is_empty() {
        return Err(bad(r, "description", "is empty; the model needs it to decide when to call the tool"));
    }
    if !keel_tools_core::name::is_valid_version(&row.version) {
        return Err(bad(r, "version", format!("{:?} is not MAJOR.MINOR or MAJOR.MINOR.PATCH", row.version)));
    }
    let Some(effect) = Effect::parse(&row.effect) else {
        return Err(bad(r, "effect", format!("{:?} is not read, write or destructive", row.effect)));
    };
    let Value::Object(extra) = &row.extra else { return Err(bad(r, "extra", "is not a JSON object")) };
    if let Some(t) = extra.get("timeout_ms")
        && t.as_u64().is_none_or(|t| t == 0)
    {
        return Err(bad(r, "extra", "timeout_ms is not a positive integer"));
    }
    if let Some(i) = extra.get("idempotent")
        && !i.is_boolean()
    {
        return Err(bad(r, "extra", "idempotent is not a boolean"));
    }
    if let Some(tags) = extra.get("tags")
        && !tags.as_array().is_some_and(|a| a.iter().all(Value::is_string))
    {
        return Err(bad(r, "extra", "tags is not an array of strings"));
    }
    // The kind is checked before anything reads the schema as one kind or the other.
    let Some(kind) = Kind::parse(&row.kind) else {
        return Err(RowError::KindUnknown { row: r.clone(), kind: row.kind.clone() });
    };
    let schema = &row.input_schema;
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(bad(
            r,
            "input_schema",
            "does not describe a JSON object (\"type\": \"object\"); tool arguments are always an object, and an \
             empty schema shows the model a tool without parameters, which it then will not call",
        ));
    }
    if kind == Kind::Remote && !schema.get("properties").is_some_and(Value::is_object) {
        return Err(bad(
            r,
            "input_schema",
            "lists no `properties`; a remote row's schema is the only source of the argument shape (the \
             forwarder takes any arguments), so list them (an empty object for a tool without arguments)",
        ));
    }
    Ok((kind, effect))
}

/// A remote row's endpoint and origin name, parsed and allowed.
fn remote_recipe(r: &RowRef, row: &ToolRow, policy: &Policy) -> Result<(Endpoint, String), RowError> {
    let endpoint = locator::parse_remote(&row.locator).map_err(|reason| RowError::BadLocator {
        row: r.clone(),
        locator: row.locator.clone(),
        reason,
    })?;
    let origin = match row.extra.get("origin_name") {
        Some(Value::String(o)) => o.clone(),
        Some(_) => {
            return Err(RowError::BadLocator {
                row: r.clone(),
                locator: row.locator.clone(),
                reason: "extra.origin_name is not a string".into(),
            });
        }
        None => {
            return Err(RowError::BadLocator {
                row: r.clone(),
                locator: row.locator.clone(),
                reason: "a remote recipe is an endpoint plus the tool's name there; extra.origin_name is missing"
                    .into(),
            });
        }
    };
    locator::check_origin_name(&origin).map_err(|reason| RowError::BadLocator {
        row: r.clone(),
        locator: row.locator.clone(),
        reason,
    })?;
    if !policy.endpoint_allowed(&endpoint) {
        return Err(RowError::EndpointNotAllowed { row: r.clone(), endpoint: endpoint.as_text() });
    }
    if let Some(output) = &row.output_schema
        && output.get("type").and_then(Value::as_str) != Some("object")
    {
        return Err(bad(
            r,
            "output_schema",
            "does not describe a JSON object; MCP structured results are objects (leave it empty for content blocks)",
        ));
    }
    Ok((endpoint, origin))
}

/// Whether a compiled contract of version `compiled` serves a row written for version `row`: the same breaking
/// series (major, or minor under 0.x) and not older than the row.
fn version_serves(row: &str, compiled: &str) -> bool {
    let (Some(r), Some(c)) =
        (keel_tools_core::name::parse_version(row), keel_tools_core::name::parse_version(compiled))
    else {
        return false;
    };
    let series = |v: (u32, u32, u32)| if v.0 == 0 { (0, v.1) } else { (v.0, 0) };
    series(r) == series(c) && r <= c
}

fn addr<T: ?Sized>(a: &Arc<T>) -> usize {
    Arc::as_ptr(a).cast::<()>() as usize
}

impl Resolver {
    pub(crate) fn new(policy: Policy, lookup: Arc<dyn ToolLookup>, connect_timeout: Duration) -> Resolver {
        Resolver {
            policy,
            lookup,
            connect_timeout,
            caches: Mutex::new(Caches::default()),
            #[cfg(feature = "mcp")]
            connections: tokio::sync::Mutex::new(HashMap::new()),
            #[cfg(feature = "mcp")]
            next_connection: AtomicU64::new(0),
        }
    }

    fn caches(&self) -> MutexGuard<'_, Caches> {
        self.caches.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every check that needs no connection: what [`Catalog::put`](crate::Catalog::put) runs before writing.
    pub(crate) fn check(&self, r: &RowRef, row: &ToolRow) -> Result<(), RowError> {
        let (kind, effect) = check_data(r, row)?;
        match kind {
            Kind::Local => self.local(r, row, effect, false).map(|_| ()),
            Kind::Remote => {
                remote_recipe(r, row, &self.policy)?;
                let def = Arc::new(self.remote_definition(r, row, effect, Arc::new(Unreachable), "check")?);
                compiles(r, &def)
            }
        }
    }

    /// Resolves one row.
    pub(crate) async fn resolve(&self, r: &RowRef, row: &ToolRow) -> Result<Resolved, RowError> {
        let (kind, effect) = check_data(r, row)?;
        match kind {
            Kind::Local => self.local(r, row, effect, true),
            Kind::Remote => self.remote(r, row, effect).await,
        }
    }

    /// Local: parse, allowlist, lookup, then the contract checks.
    fn local(&self, r: &RowRef, row: &ToolRow, effect: Effect, cache: bool) -> Result<Resolved, RowError> {
        let target = locator::parse_local(&row.locator).map_err(|reason| RowError::BadLocator {
            row: r.clone(),
            locator: row.locator.clone(),
            reason,
        })?;
        // The allowlist comes before the lookup: a path's module is known from the locator alone.
        if let LocalTarget::Path(path) = &target {
            let module = path.parent().unwrap_or_else(|| path.clone());
            if !self.policy.module_allowed(path) {
                return Err(RowError::ModuleNotAllowed {
                    row: r.clone(),
                    module: module.to_string(),
                    allowed: self.policy.module_list(),
                });
            }
        }
        let compiled = match self.lookup.lookup(&target) {
            Lookup::Found(def) => def,
            Lookup::Module(holds) => {
                return Err(RowError::NotCallable { row: r.clone(), locator: row.locator.clone(), holds });
            }
            Lookup::Missing => return Err(RowError::TargetMissing { row: r.clone(), locator: row.locator.clone() }),
        };
        // A tool name says nothing about its module until it is found; the allowlist applies all the same.
        if let LocalTarget::Name(_) = &target {
            let module = module_of(&compiled);
            if !module.as_ref().is_some_and(|m| self.policy.module_allowed(m)) {
                return Err(RowError::ModuleNotAllowed {
                    row: r.clone(),
                    module: module.map_or_else(|| "(not compiled)".to_owned(), |m| m.to_string()),
                    allowed: self.policy.module_list(),
                });
            }
        }
        if !version_serves(&row.version, compiled.version()) {
            return Err(RowError::VersionMismatch {
                row: r.clone(),
                row_version: row.version.clone(),
                compiled: compiled.version().to_owned(),
            });
        }
        if effect < compiled.effect() {
            return Err(RowError::EffectWeakens { row: r.clone(), row_effect: effect, compiled: compiled.effect() });
        }
        if let Some(output) = &row.output_schema
            && Some(output) != compiled.output_schema()
        {
            return Err(bad(
                r,
                "output_schema",
                "differs from the compiled tool's result schema; a local tool's results are its handler's: leave \
                 output_schema empty (NULL) or copy the compiled one",
            ));
        }
        let key: RowKey = (row.tenant.clone(), row.name.clone());
        if cache
            && let Some(hit) = self.caches().defs.get(&key)
            && hit.row == *row
            && hit.handler == addr(&compiled)
        {
            return Ok(Resolved::Local { target: compiled, definition: hit.def.clone() });
        }
        let derived = compiled
            .derived(row.name.clone(), row.description.clone(), row.input_schema.clone(), effect)
            .map_err(|e| bad_from(r, "input_schema", e.to_string(), e))?;
        check_narrows(derived.input_schema(), compiled.input_schema()).map_err(|w| RowError::SchemaWidens {
            row: r.clone(),
            pointer: w.pointer,
            reason: w.reason,
        })?;
        let same = derived.name() == compiled.name()
            && derived.description() == compiled.description()
            && derived.effect() == compiled.effect()
            && derived.input_schema() == compiled.input_schema();
        let definition = if same { compiled.clone() } else { Arc::new(derived) };
        compiles(r, &definition)?;
        if cache {
            self.caches()
                .defs
                .insert(key, CachedDef { row: row.clone(), handler: addr(&compiled), def: definition.clone() });
        }
        Ok(Resolved::Local { target: compiled, definition })
    }

    fn remote_definition(
        &self,
        r: &RowRef,
        row: &ToolRow,
        effect: Effect,
        handler: Arc<dyn DynHandler>,
        source: &str,
    ) -> Result<ToolDefinition, RowError> {
        let output = row.output_schema.clone().unwrap_or_else(keel_tools_core::content::content_schema);
        let idempotent = row.extra.get("idempotent").and_then(Value::as_bool).unwrap_or(effect == Effect::Read);
        let mut builder = ToolDefinition::builder(row.name.clone())
            .description(row.description.clone())
            .version(row.version.clone())
            .effect(effect)
            .idempotent(idempotent)
            .tag("catalog")
            .tag("mcp")
            .source(source.to_owned())
            .input_schema(row.input_schema.clone())
            .output_schema(output)
            .handler(handler);
        if let Some(ms) = row.extra.get("timeout_ms").and_then(Value::as_u64) {
            builder = builder.timeout(Duration::from_millis(ms));
        }
        for tag in row.extra.get("tags").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            builder = builder.tag(tag.to_owned());
        }
        builder.build().map_err(|e| bad_from(r, "input_schema", e.to_string(), e))
    }

    /// Remote: parse, allowlist, connect (shared per endpoint), then the forwarder (cached per row and recipe).
    #[cfg(feature = "mcp")]
    async fn remote(&self, r: &RowRef, row: &ToolRow, effect: Effect) -> Result<Resolved, RowError> {
        let (endpoint, origin) = remote_recipe(r, row, &self.policy)?;
        let digest = match row.extra.get("digest") {
            None | Some(Value::Null) => None,
            Some(Value::String(d)) => Some(d.clone()),
            Some(_) => {
                return Err(RowError::BadLocator {
                    row: r.clone(),
                    locator: row.locator.clone(),
                    reason: "extra.digest is not a string (keel-tools-mcp's client::pin::tool_digest)".into(),
                });
            }
        };
        let (conn_id, server) = self.connection(r, &endpoint).await?;
        let fkey = ForwarderKey {
            tenant: row.tenant.clone(),
            name: row.name.clone(),
            endpoint: endpoint.clone(),
            origin: origin.clone(),
            structured: row.output_schema.is_some(),
            digest: digest.clone(),
        };
        let key: RowKey = (row.tenant.clone(), row.name.clone());
        let changed = |drift: keel_tools_mcp::client::Drift| RowError::ToolChanged {
            row: r.clone(),
            endpoint: endpoint.as_text(),
            origin: origin.clone(),
            change: Box::new(crate::error::ToolChange {
                pinned: drift.pinned.unwrap_or_default(),
                current: drift.current,
                diff: drift.diff,
            }),
        };
        let cached = {
            let caches = self.caches();
            caches.forwarders.get(&fkey).filter(|(id, _)| *id == conn_id).map(|(_, f)| f.clone())
        };
        let forwarder = match (cached, &digest) {
            // A pinned tool that changed since: the row is withheld; its forwarder refuses calls meanwhile.
            (Some(f), _) => match f.withheld() {
                Some(drift) => return Err(changed(drift)),
                None => f,
            },
            (None, None) => server.forwarder(row.name.clone(), origin.clone(), fkey.structured),
            (None, Some(d)) => match server.pinned(row.name.clone(), origin.clone(), fkey.structured, d).await {
                Ok(f) => f,
                Err(keel_tools_mcp::client::PinnedError::Drift(drift)) => return Err(changed(drift)),
                Err(e) => {
                    return Err(RowError::EndpointUnreachable {
                        row: r.clone(),
                        endpoint: endpoint.as_text(),
                        source: Arc::new(e),
                    });
                }
            },
        };
        self.caches().forwarders.insert(fkey, (conn_id, forwarder.clone()));
        if let Some(hit) = self.caches().defs.get(&key)
            && hit.row == *row
            && hit.handler == addr(&forwarder)
        {
            return Ok(Resolved::Remote { forwarder, definition: hit.def.clone() });
        }
        let source = format!("catalogue row {:?}: MCP tool {origin:?} at {endpoint}", row.name);
        let def = Arc::new(self.remote_definition(r, row, effect, forwarder.clone(), &source)?);
        compiles(r, &def)?;
        self.caches().defs.insert(key, CachedDef { row: row.clone(), handler: addr(&forwarder), def: def.clone() });
        Ok(Resolved::Remote { forwarder, definition: def })
    }

    /// Remote, in a build without MCP: checked as a write checks it, then refused, as an endpoint this build cannot
    /// reach.
    #[cfg(not(feature = "mcp"))]
    #[allow(clippy::unused_async, reason = "the signature of the build with `mcp`")]
    async fn remote(&self, r: &RowRef, row: &ToolRow, effect: Effect) -> Result<Resolved, RowError> {
        let (endpoint, _) = remote_recipe(r, row, &self.policy)?;
        self.remote_definition(r, row, effect, Arc::new(Unreachable), "check")?;
        Err(RowError::EndpointUnreachable {
            row: r.clone(),
            endpoint: endpoint.as_text(),
            source: Arc::new(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "this build of keel-tools-catalog has no MCP client: turn on its `mcp` feature (on by default)",
            )),
        })
    }

    /// The open connection to `endpoint`, opened on first use and again after it closed.
    #[cfg(feature = "mcp")]
    async fn connection(&self, r: &RowRef, endpoint: &Endpoint) -> Result<(u64, RemoteServer), RowError> {
        let mut connections = self.connections.lock().await;
        if let Some(c) = connections.get(endpoint)
            && !c.server.is_closed()
        {
            return Ok((c.id, c.server.clone()));
        }
        let unreachable = |source: Arc<dyn std::error::Error + Send + Sync>| RowError::EndpointUnreachable {
            row: r.clone(),
            endpoint: endpoint.as_text(),
            source,
        };
        let connect = async {
            match endpoint {
                Endpoint::Http { url, .. } => RemoteServer::connect_http(NAMESPACE, url).await,
                Endpoint::Stdio { argv } => {
                    let mut cmd = tokio::process::Command::new(&argv[0]);
                    cmd.args(&argv[1..]).kill_on_drop(true);
                    RemoteServer::connect_child(NAMESPACE, cmd).await
                }
            }
        };
        let server = match tokio::time::timeout(self.connect_timeout, connect).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(unreachable(Arc::new(e))),
            Err(_) => {
                let text = format!("no answer within {:?}", self.connect_timeout);
                return Err(unreachable(Arc::new(std::io::Error::new(std::io::ErrorKind::TimedOut, text))));
            }
        };
        let id = self.next_connection.fetch_add(1, Ordering::Relaxed);
        connections.insert(endpoint.clone(), Connection { id, server: server.clone() });
        Ok((id, server))
    }

    /// Forgets cached definitions and forwarders of rows in `scopes` that are no longer in `live` (rows deleted,
    /// disabled or edited), and closes connections no cached forwarder uses.
    #[cfg(feature = "mcp")]
    pub(crate) async fn prune(&self, scopes: &[Option<String>], live_rows: &HashSet<RowKey>, live: &[ToolRow]) {
        let live_forwarders: HashSet<ForwarderKey> = live
            .iter()
            .filter(|row| Kind::parse(&row.kind) == Some(Kind::Remote))
            .filter_map(|row| {
                let endpoint = locator::parse_remote(&row.locator).ok()?;
                let origin = row.origin_name()?.to_owned();
                Some(ForwarderKey {
                    tenant: row.tenant.clone(),
                    name: row.name.clone(),
                    endpoint,
                    origin,
                    structured: row.output_schema.is_some(),
                    digest: row.digest().map(str::to_owned),
                })
            })
            .collect();
        let used: HashSet<Endpoint> = {
            let mut caches = self.caches();
            caches.defs.retain(|k, _| !scopes.contains(&k.0) || live_rows.contains(k));
            caches.forwarders.retain(|k, _| !scopes.contains(&k.tenant) || live_forwarders.contains(k));
            caches.forwarders.keys().map(|k| k.endpoint.clone()).collect()
        };
        let dropped: Vec<RemoteServer> = {
            let mut connections = self.connections.lock().await;
            let gone: Vec<Endpoint> = connections.keys().filter(|e| !used.contains(*e)).cloned().collect();
            gone.into_iter().filter_map(|e| connections.remove(&e)).map(|c| c.server).collect()
        };
        for server in dropped {
            server.close().await;
        }
    }

    /// Forgets cached definitions of rows in `scopes` that are no longer in `live_rows`.
    #[cfg(not(feature = "mcp"))]
    #[allow(clippy::unused_async, reason = "the signature of the build with `mcp`")]
    pub(crate) async fn prune(&self, scopes: &[Option<String>], live_rows: &HashSet<RowKey>, _live: &[ToolRow]) {
        self.caches().defs.retain(|k, _| !scopes.contains(&k.0) || live_rows.contains(k));
    }
}
