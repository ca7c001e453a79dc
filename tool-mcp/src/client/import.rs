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
        let mut definitions = Vec::new();
        let mut forwarders = BTreeMap::new();
        for (name, origins) in by_name {
            let [tool] = origins.as_slice() else {
                let mut origins: Vec<String> = origins.iter().map(|t| t.name.to_string()).collect();
                origins.sort();
                problems.push(ImportProblem::Collision { name, origins });
                continue;
            };
            match self.definition(&name, tool) {
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
        Ok(RemoteTools { definitions, forwarders })
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
    ) -> Result<(ToolDefinition, Arc<Forwarder>), DefinitionError> {
        let conn = &self.server.conn;
        let effect = self.effect_of(tool);
        let forwarder = self.server.forwarder(name, tool.name.to_string(), tool.output_schema.is_some());
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

/// The imported tools of one server: definitions for a registry, and their forwarders.
pub struct RemoteTools {
    pub(super) definitions: Vec<ToolDefinition>,
    pub(super) forwarders: BTreeMap<String, Arc<Forwarder>>,
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
}

impl ForwarderInner {
    pub(super) async fn forward(&self, arguments: Value, ctx: CallContext) -> Result<Value, ToolError> {
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
