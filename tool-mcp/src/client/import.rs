//! A remote server's tools as keel tools: the [`Importer`]'s settings, the [`RemoteTools`] it imports, and the
//! [`Forwarder`] each one's handler calls through.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use keel_tools_core::definition::{BoxFuture, DefinitionError, DynHandler, Effect, ToolDefinition};
use keel_tools_core::{CallContext, ToolError};
use rmcp::model::{CallToolRequestParams, Tool};
use rmcp::service::ServiceError;
use serde_json::Value;

use super::pin::{Drift, PinState, Pins, listed_entry, tool_digest};
use super::{Connection, ImportError, ImportProblem, RemoteServer};
use crate::names;
use crate::render;

/// Import settings; see [`RemoteServer::importer`].
#[must_use]
pub struct Importer {
    pub(super) server: RemoteServer,
    pub(super) effects: BTreeMap<String, Effect>,
    pub(super) trust_annotations: bool,
    pub(super) timeout: Option<Duration>,
    pub(super) pins: Option<Pins>,
    pub(super) strict: bool,
}

impl Importer {
    /// The effect of remote tool `origin` (its MCP name), whatever its annotations say.
    pub fn effect(mut self, origin: impl Into<String>, effect: Effect) -> Self {
        self.effects.insert(origin.into(), effect);
        self
    }
    /// Whether the effects follow the remote's annotations (default `true`); with `false`, every tool without an
    /// override is `destructive`.
    pub fn trust_annotations(mut self, trust: bool) -> Self {
        self.trust_annotations = trust;
        self
    }
    /// The timeout of every imported tool (default: the executor's).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
    /// Imports only the tools that match their pin, and follows the server's `tools/list_changed` to withhold a tool
    /// that changes afterwards ([`crate::client::pin`]). Without pins, every listed tool is imported as it is.
    pub fn pinned(mut self, pins: Pins) -> Self {
        self.pins = Some(pins);
        self
    }
    /// Whether a tool whose description (or argument schema) the description checks flag is withheld (`true`)
    /// or imported with a warning (`false`, the default). The checks look for the signs of tool poisoning: hidden
    /// characters, instructions addressed to the model, a description far longer than its schema warrants
    /// (keel-tools-contract's `lint::description`). Either way the findings are in [`RemoteTools::findings`].
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Lists the remote tools and builds one definition (and one forwarder) per tool. Unmappable names, name
    /// collisions and invalid entries are all reported; nothing is dropped silently.
    pub async fn import(self) -> Result<RemoteTools, ImportError> {
        let conn = &self.server.conn;
        let fail = |problems| ImportError { namespace: conn.namespace.clone(), problems };
        let tools = self.server.list_tools().await.map_err(|e| fail(vec![ImportProblem::ListFailed(Arc::new(e))]))?;
        let mut problems = Vec::new();
        let mut by_name: BTreeMap<String, Vec<&Tool>> = BTreeMap::new();
        for tool in &tools {
            match names::map_tool_name(&conn.namespace, &tool.name) {
                Ok(name) => by_name.entry(name).or_default().push(tool),
                Err(e) => problems.push(ImportProblem::Unmappable(e)),
            }
        }
        for o in self.effects.keys() {
            if !tools.iter().any(|t| t.name == o.as_str()) {
                problems.push(ImportProblem::UnknownOverride(o.clone()));
            }
        }
        let state = self.pins.as_ref().map(|pins| Arc::new(self.pin_state(pins, &tools)));
        let mut definitions = Vec::new();
        let mut forwarders = BTreeMap::new();
        let mut findings = Vec::new();
        for (name, origins) in by_name {
            if let Some(state) = &state
                && origins.iter().any(|t| !state.imported.contains_key(t.name.as_ref()))
            {
                continue;
            }
            let flagged = description_findings(&conn.namespace, &origins, &mut findings);
            if flagged && self.strict {
                continue;
            }
            let [tool] = origins.as_slice() else {
                let mut origins: Vec<String> = origins.iter().map(|t| t.name.to_string()).collect();
                origins.sort();
                problems.push(ImportProblem::Collision { name, origins });
                continue;
            };
            match self.definition(&name, tool, state.clone()) {
                Ok((def, forwarder)) => {
                    definitions.push(def);
                    forwarders.insert(name, forwarder);
                }
                Err(e) => problems
                    .push(ImportProblem::InvalidDefinition { origin: tool.name.to_string(), source: Arc::new(e) }),
            }
        }
        if !problems.is_empty() {
            return Err(fail(problems));
        }
        if let Some(state) = &state {
            follow_list_changed(&self.server, state);
            for drift in state.drifts.lock().map(|d| d.values().cloned().collect::<Vec<_>>()).unwrap_or_default() {
                drift.log();
            }
        }
        Ok(RemoteTools { definitions, forwarders, pins: state, server: self.server.clone(), findings })
    }

    /// Which listed tools match their pin (they are imported), and the drift of every other one.
    fn pin_state(&self, pins: &Pins, tools: &[Tool]) -> PinState {
        let conn = &self.server.conn;
        let mut imported = BTreeMap::new();
        let mut drifts = BTreeMap::new();
        for tool in tools {
            let origin = tool.name.to_string();
            let digest = tool_digest(&conn.identity, tool);
            let entry = listed_entry(tool);
            match pins.get(&origin) {
                Some(pin) if pin.digest == digest => {
                    imported.insert(origin, (digest, entry));
                }
                pin => {
                    let pinned = pin.map(|p| (p.digest.as_str(), p.entry.as_ref()));
                    drifts.insert(
                        origin.clone(),
                        Drift::between(&conn.namespace, &origin, pinned, Some((&digest, &entry))),
                    );
                }
            }
        }
        for (origin, pin) in &pins.tools {
            if !tools.iter().any(|t| t.name == origin.as_str()) {
                drifts.insert(origin.clone(), Drift::between(&conn.namespace, origin, Some((&pin.digest, None)), None));
            }
        }
        PinState {
            namespace: conn.namespace.clone(),
            identity: conn.identity.clone(),
            imported,
            drifts: std::sync::Mutex::new(drifts),
            sender: tokio::sync::broadcast::channel(64).0,
            only: None,
        }
    }

    pub(super) fn effect_of(&self, tool: &Tool) -> Effect {
        if let Some(e) = self.effects.get(tool.name.as_ref()) {
            return *e;
        }
        let Some(a) = tool.annotations.as_ref().filter(|_| self.trust_annotations) else { return Effect::Destructive };
        match (a.read_only_hint, a.destructive_hint) {
            (Some(true), _) => Effect::Read,
            (_, Some(false)) => Effect::Write,
            _ => Effect::Destructive,
        }
    }

    pub(super) fn definition(
        &self,
        name: &str,
        tool: &Tool,
        pins: Option<Arc<PinState>>,
    ) -> Result<(ToolDefinition, Arc<Forwarder>), DefinitionError> {
        let conn = &self.server.conn;
        let effect = self.effect_of(tool);
        let forwarder =
            self.server.pinned_forwarder(name.to_owned(), tool.name.to_string(), tool.output_schema.is_some(), pins);
        let description = tool
            .description
            .as_deref()
            .filter(|d| !d.trim().is_empty())
            .map_or_else(|| format!("{} (tool of MCP server {})", tool.name, conn.namespace), str::to_owned);
        let idempotent = tool
            .annotations
            .as_ref()
            .filter(|_| self.trust_annotations)
            .and_then(|a| a.idempotent_hint)
            .unwrap_or(effect == Effect::Read);
        let output = match &tool.output_schema {
            Some(s) => Value::Object((**s).clone()),
            None => keel_tools_core::content::content_schema(),
        };
        let mut builder = ToolDefinition::builder(name.to_owned())
            .description(description)
            .version(conn.version.clone())
            .effect(effect)
            .idempotent(idempotent)
            .tag("mcp")
            .tag(format!("mcp:{}", conn.namespace))
            .source(format!("mcp:{} tool {:?}", conn.namespace, tool.name))
            .input_schema(Value::Object((*tool.input_schema).clone()))
            .output_schema(output)
            .handler(forwarder.clone());
        if let Some(t) = self.timeout {
            builder = builder.timeout(t);
        }
        let def = builder.build()?;
        Ok((def, forwarder))
    }
}

/// Lists the server's tools again each time it sends `notifications/tools/list_changed`, for as long as a forwarder
/// (or the [`RemoteTools`]) of this pinned import lives and the connection is open. In an `initialize` session the
/// server sends it unasked; on protocol 2026-07-28 keel asks for it with a `subscriptions/listen` stream.
pub(super) fn follow_list_changed(server: &RemoteServer, state: &Arc<PinState>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    let stateless = server.protocol_version().is_some_and(|v| v == rmcp::model::ProtocolVersion::V_2026_07_28);
    let mut changes = server.conn.list_changed.subscribe();
    let peer = server.conn.peer.clone();
    let conn = Arc::downgrade(&server.conn);
    let state = Arc::downgrade(state);
    runtime.spawn(async move {
        let mut subscription = if stateless {
            let filter = rmcp::model::SubscriptionFilter::builder().tools_list_changed().build();
            match peer.listen(filter).await {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(
                        target: super::pin::DRIFT_TARGET,
                        error = %e,
                        "the MCP server refused a subscriptions/listen stream for tools/list_changed; \
                         a change is found by RemoteTools::recheck only"
                    );
                    None
                }
            }
        } else {
            None
        };
        loop {
            let changed = match &mut subscription {
                Some(s) => match s.next().await {
                    Ok(Some(rmcp::model::ServerNotification::ToolListChangedNotification(_))) => true,
                    Ok(Some(_)) => false,
                    Ok(None) | Err(_) => return,
                },
                None => {
                    if changes.changed().await.is_err() {
                        return;
                    }
                    true
                }
            };
            if !changed {
                continue;
            }
            let (Some(conn), Some(state)) = (conn.upgrade(), state.upgrade()) else { return };
            match conn.list_tools().await {
                Ok(tools) => {
                    state.compare(&tools);
                }
                Err(e) => tracing::warn!(
                    target: super::pin::DRIFT_TARGET,
                    server = %state.namespace,
                    error = %e,
                    "tools/list after tools/list_changed failed; the imported tools stay as they were"
                ),
            }
        }
    });
}

/// Runs the description checks on each of `origins` (the remote tools of one keel name), logs each finding as a
/// warning and adds it to `out`; returns whether any was found.
fn description_findings(
    namespace: &str,
    origins: &[&Tool],
    out: &mut Vec<(String, keel_tools_contract::lint::description::DescriptionFinding)>,
) -> bool {
    let mut found = false;
    for tool in origins {
        let description = tool.description.as_deref().unwrap_or_default();
        let schema = Value::Object((*tool.input_schema).clone());
        for finding in keel_tools_contract::lint::description::check_description(&tool.name, description, &schema) {
            tracing::warn!(
                target: super::pin::DRIFT_TARGET,
                server = %namespace,
                tool = %tool.name,
                finding = %finding,
                "a remote tool's description looks poisoned"
            );
            out.push((tool.name.to_string(), finding));
            found = true;
        }
    }
    found
}

/// The imported tools of one server: definitions for a registry, and their forwarders.
pub struct RemoteTools {
    pub(super) definitions: Vec<ToolDefinition>,
    pub(super) forwarders: BTreeMap<String, Arc<Forwarder>>,
    pub(super) pins: Option<Arc<PinState>>,
    pub(super) server: RemoteServer,
    pub(super) findings: Vec<(String, keel_tools_contract::lint::description::DescriptionFinding)>,
}

impl fmt::Debug for RemoteTools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteTools").field("tools", &self.forwarders.keys().collect::<Vec<_>>()).finish()
    }
}

impl RemoteTools {
    /// The keel names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.forwarders.keys().map(String::as_str)
    }
    /// The definitions, to add with [`RegistryBuilder::tools`](keel_tools_core::registry::RegistryBuilder::tools).
    pub fn definitions(&self) -> &[ToolDefinition] {
        &self.definitions
    }
    /// The forwarder of the tool named `name` (the same instance its definition holds).
    pub fn forwarder(&self, name: &str) -> Option<&Arc<Forwarder>> {
        self.forwarders.get(name)
    }
    /// Every forwarder, by keel name.
    pub fn forwarders(&self) -> &BTreeMap<String, Arc<Forwarder>> {
        &self.forwarders
    }
    /// The definitions, by value.
    pub fn into_definitions(self) -> Vec<ToolDefinition> {
        self.definitions
    }

    /// What the description checks found, by the tool's MCP name ([`Importer::strict`]): with a strict import,
    /// each tool named here was withheld.
    pub fn findings(&self) -> &[(String, keel_tools_contract::lint::description::DescriptionFinding)] {
        &self.findings
    }

    /// Whether the import was pinned ([`Importer::pinned`]).
    pub fn is_pinned(&self) -> bool {
        self.pins.is_some()
    }

    /// Every tool withheld from a pinned import, and why, by MCP name: found at import and since (by
    /// [`RemoteTools::recheck`] or a `tools/list_changed`). Empty for an unpinned import.
    pub fn drift(&self) -> Vec<Drift> {
        let Some(state) = &self.pins else { return Vec::new() };
        state.drifts.lock().map(|d| d.values().cloned().collect()).unwrap_or_default()
    }

    /// The drifts found from now on, as they are found (a pinned import; an unpinned one sends nothing).
    pub fn drifts(&self) -> tokio::sync::broadcast::Receiver<Drift> {
        match &self.pins {
            Some(state) => state.sender.subscribe(),
            None => tokio::sync::broadcast::channel(1).1,
        }
    }

    /// Lists the server's tools again and compares them with the import (what a `tools/list_changed` does): an
    /// imported tool that changed or disappeared is withheld from now on. Returns the drifts not found before.
    pub async fn recheck(&self) -> Result<Vec<Drift>, ServiceError> {
        let Some(state) = &self.pins else { return Ok(Vec::new()) };
        let tools = self.server.list_tools().await?;
        Ok(state.compare(&tools))
    }
}

/// Forwards one remote tool's calls: held by its definition (and so by the registry), one per tool.
pub struct Forwarder {
    pub(super) inner: Arc<ForwarderInner>,
}

pub(super) struct ForwarderInner {
    pub(super) conn: Arc<Connection>,
    pub(super) name: String,
    pub(super) origin: String,
    pub(super) structured: bool,
    pub(super) calls: AtomicU64,
    pub(super) failures: AtomicU64,
    /// The pins of a pinned import: a tool that drifted is refused here, before anything is sent.
    pub(super) pins: Option<Arc<PinState>>,
}

impl fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Forwarder")
            .field("name", &self.inner.name)
            .field("origin", &self.inner.origin)
            .field("calls", &self.calls())
            .field("failures", &self.failures())
            .finish_non_exhaustive()
    }
}

impl Forwarder {
    /// The keel name, e.g. `everything.get_tiny_image`.
    pub fn name(&self) -> &str {
        &self.inner.name
    }
    /// The remote's name, e.g. `getTinyImage`, used on the wire.
    pub fn origin(&self) -> &str {
        &self.inner.origin
    }
    /// The namespace (server) it belongs to.
    pub fn namespace(&self) -> &str {
        &self.inner.conn.namespace
    }
    /// Calls forwarded so far (each one was sent to the remote server).
    pub fn calls(&self) -> u64 {
        self.inner.calls.load(Ordering::Relaxed)
    }
    /// Whether results are the remote's `structuredContent` (the tool has an `outputSchema`) rather than its
    /// content blocks.
    pub fn structured(&self) -> bool {
        self.inner.structured
    }
    /// Forwarded calls that failed (remote error, protocol or transport failure).
    pub fn failures(&self) -> u64 {
        self.inner.failures.load(Ordering::Relaxed)
    }
    /// Why the tool is withheld, when it is pinned and the server changed or removed it since: its calls are then
    /// refused with [`Drift::code`] and never sent.
    pub fn withheld(&self) -> Option<Drift> {
        self.inner.pins.as_ref()?.withheld(&self.inner.origin)
    }
}

impl ForwarderInner {
    pub(super) async fn forward(&self, arguments: Value, ctx: CallContext) -> Result<Value, ToolError> {
        if let Some(drift) = self.pins.as_ref().and_then(|p| p.withheld(&self.origin)) {
            return Err(drift.refusal());
        }
        let Value::Object(arguments) = arguments else {
            return Err(ToolError::internal(std::io::Error::other("validated arguments are not an object")));
        };
        self.calls.fetch_add(1, Ordering::Relaxed);
        #[cfg_attr(not(feature = "otel"), expect(unused_mut))]
        let mut params = CallToolRequestParams::new(self.origin.clone()).with_arguments(arguments);
        #[cfg(feature = "otel")]
        crate::otel::inject(&mut params.meta.get_or_insert_with(Default::default).0);
        // Dropping the request (local timeout or cancellation) sends `notifications/cancelled` to the remote.
        let outcome = tokio::select! {
            r = self.conn.call_tool(params) => r,
            () = ctx.cancellation().cancelled() => {
                return Err(ToolError::internal(std::io::Error::other("call cancelled")));
            }
        };
        let result = match outcome {
            Ok(r) => render::remote_outcome(r, self.structured),
            // The remote tool needs what this connection does not offer (sampling, elicitation, roots, tasks): the
            // same code as a local tool's in the same case.
            Err(ServiceError::McpError(e)) if e.code == rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY => {
                let required = e.data.as_ref().and_then(|d| d.get("requiredCapabilities")).cloned();
                Err(keel_tools_core::tool_error!(
                    "client_capability_missing",
                    "the MCP server's tool {:?} needs a client capability this connection does not offer",
                    self.origin
                )
                .with_details(serde_json::json!({"requiredCapabilities": required})))
            }
            Err(ServiceError::McpError(e)) => Err(keel_tools_core::tool_error!(
                "remote_rejected",
                "the MCP server rejected the call to {:?} (JSON-RPC error {})",
                self.origin,
                e.code.0
            )
            .with_details(render::rpc_error_details(e.code.0, &e.message))),
            Err(e) => {
                tracing::warn!(tool = %self.name, error = %e, "forwarding to the MCP server failed");
                Err(ToolError::internal(ForwardError { tool: self.name.clone(), source: e }))
            }
        };
        if result.is_err() {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
        result
    }
}

/// A forwarded call that failed in the transport or the protocol: the executor's internal-error hook gets the SDK's
/// error as the source.
#[derive(Debug)]
pub(super) struct ForwardError {
    pub(super) tool: String,
    pub(super) source: ServiceError,
}

impl fmt::Display for ForwardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "forwarding to {} failed: {}", self.tool, self.source)
    }
}

impl std::error::Error for ForwardError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl DynHandler for Forwarder {
    fn call(&self, arguments: Value, ctx: CallContext) -> BoxFuture<Result<Value, ToolError>> {
        let inner = self.inner.clone();
        Box::pin(async move { inner.forward(arguments, ctx).await })
    }
}
