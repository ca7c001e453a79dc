//! What a tool is: [`ToolDefinition`], its [`Effect`], where it came from, and the erased handler.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::call_context::{CallContext, Requirements};
pub(crate) use crate::effect::Effect;
use crate::error::ToolError;
use crate::name::{self, NameError};
use crate::params::{Kind, ParamInfo, Plan};
use crate::tool_schemas::ToolSchemas;
use crate::tool_schemas::{self as render};
use keel_tools_schema::validate::CompiledSchema;

/// Where a compiled tool is declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SourceLocation {
    /// `file!()` of the declaration.
    pub file: &'static str,
    /// `line!()` of the declaration.
    pub line: u32,
    /// `module_path!()` of the declaration.
    pub module_path: &'static str,
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{} (in {})", self.file, self.line, self.module_path)
    }
}

/// Where a definition came from.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Origin {
    /// Declared with `#[tool]` and compiled into this binary.
    Compiled {
        /// The declaration site.
        location: SourceLocation,
        /// The handler fn's name.
        fn_name: &'static str,
    },
    /// Built at run time with [`ToolDefinition::builder`]; `source` says by whom (e.g. `mcp:server`).
    Dynamic {
        /// A free-form label of the creator, shown in duplicate-name errors.
        source: Cow<'static, str>,
    },
}

impl Origin {
    /// `module::path::fn_name` for compiled tools.
    pub fn rust_path(&self) -> Option<String> {
        match self {
            Origin::Compiled { location, fn_name } => Some(format!("{}::{}", location.module_path, fn_name)),
            Origin::Dynamic { .. } => None,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Compiled { location, fn_name } => {
                write!(f, "fn {fn_name} at {}:{} (in {})", location.file, location.line, location.module_path)
            }
            Origin::Dynamic { source } => write!(f, "dynamic definition from {source}"),
        }
    }
}

/// The future an async handler returns.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A handler whose future is built at run time (remote forwarders, tests). Compiled tools never need this.
pub trait DynHandler: Send + Sync + 'static {
    /// Runs the tool on arguments that already passed validation.
    fn call(&self, arguments: Value, ctx: CallContext) -> BoxFuture<Result<Value, ToolError>>;
}

impl<F, Fut> DynHandler for F
where
    F: Fn(Value, CallContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    fn call(&self, arguments: Value, ctx: CallContext) -> BoxFuture<Result<Value, ToolError>> {
        Box::pin((self)(arguments, ctx))
    }
}

/// What [`ToolDefinitionBuilder::handler`] takes: a [`DynHandler`] (a closure, a handler object), or one already
/// shared behind an `Arc`, which is kept as it is (not wrapped again).
pub trait IntoDynHandler {
    /// The shared handler.
    fn into_dyn_handler(self) -> Arc<dyn DynHandler>;
}

impl<H: DynHandler> IntoDynHandler for H {
    fn into_dyn_handler(self) -> Arc<dyn DynHandler> {
        Arc::new(self)
    }
}

impl<H: DynHandler> IntoDynHandler for Arc<H> {
    fn into_dyn_handler(self) -> Arc<dyn DynHandler> {
        self
    }
}

impl IntoDynHandler for Arc<dyn DynHandler> {
    fn into_dyn_handler(self) -> Arc<dyn DynHandler> {
        self
    }
}

/// The type-erased entry point of a tool.
#[derive(Clone)]
#[non_exhaustive]
pub enum Handler {
    /// An `async fn`: polled on the caller's task.
    Async(fn(Value, CallContext) -> BoxFuture<Result<Value, ToolError>>),
    /// A plain `fn` marked `blocking = true`: run on Tokio's blocking pool, so a handler that blocks never stalls
    /// a runtime worker.
    Blocking(fn(Value, CallContext) -> Result<Value, ToolError>),
    /// A plain `fn` (the default): called directly on the caller's thread, with the call's context lent for the
    /// call.
    Inline(fn(Value, &CallContext) -> Result<Value, ToolError>),
    /// A handler object built at run time.
    Dynamic(Arc<dyn DynHandler>),
}

impl fmt::Debug for Handler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Handler::Async(_) => "Handler::Async",
            Handler::Blocking(_) => "Handler::Blocking",
            Handler::Inline(_) => "Handler::Inline",
            Handler::Dynamic(_) => "Handler::Dynamic",
        })
    }
}

/// Whether a call of the tool may run as a task: started now, its result fetched later (the MCP Tasks extension:
/// `tasks/get`, `tasks/update`, `tasks/cancel`). `#[tool(task = "optional")]` or `"required"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum TaskSupport {
    /// Always answered in the call (the default).
    #[default]
    Never,
    /// Run as a task for a client that supports tasks; answered in the call for the others.
    Optional,
    /// Only for clients that support tasks: the others are refused (over MCP, `-32021`).
    Required,
}

/// When a call of a task tool becomes a task. `#[tool(task_start = "admission")]` (the default) or `"handler"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum TaskStart {
    /// As soon as the call has passed every check before its handler (registered, arguments valid, policy).
    #[default]
    Admission,
    /// When the handler calls [`CallContext::begin_task`]: it may first ask for input in the request itself.
    Handler,
}

/// The compile-time record `#[tool]` submits to `inventory`. Not constructed by hand.
#[doc(hidden)]
pub struct StaticTool {
    pub name: &'static str,
    pub fn_name: &'static str,
    pub description: &'static str,
    pub version: &'static str,
    pub effect: Effect,
    pub idempotent: bool,
    pub task: TaskSupport,
    pub task_start: TaskStart,
    pub timeout_ms: Option<u64>,
    pub tags: &'static [&'static str],
    pub scopes: &'static [&'static str],
    /// `example = "..."`: JSON objects of arguments, as written (the macro checked that each parses).
    pub examples: &'static [&'static str],
    /// `defer`.
    pub deferred: bool,
    pub location: SourceLocation,
    pub input_schema: fn() -> Value,
    pub output_schema: fn() -> Value,
    pub handler: Handler,
    /// Each parameter's role, name and schema, in call order.
    pub params: fn() -> Vec<ParamInfo>,
    /// How the arguments map to the parameters.
    pub plan: fn() -> &'static Plan,
}

inventory::collect!(StaticTool);

/// Where a schema comes from: a generator fn (compiled tools, run once and cached) or a value.
#[derive(Clone)]
pub(crate) enum SchemaSource {
    Generated(fn() -> Value),
    Value(Value),
}

impl SchemaSource {
    pub(crate) fn produce(&self) -> Value {
        match self {
            SchemaSource::Generated(f) => f(),
            SchemaSource::Value(v) => v.clone(),
        }
    }
}

/// What a tool is: [`ToolDefinition`], its [`Effect`], where it came from, and the erased handler.
///
/// A definition is immutable once built. Compiled tools start as a [`StaticTool`] that `#[tool]` submits to
/// `inventory`; the registry turns each into a `ToolDefinition` that borrows the static strings. Tools built at run
/// time (remote forwarders, catalogue rows, tests) use [`ToolDefinition::builder`].
///
/// One tool: its contract (name, description, version, effect, schemas) and its handler.
///
/// Immutable once built; shared behind `Arc` by registries and views. Schemas are produced on first use and cached
/// for the life of the definition.
pub struct ToolDefinition {
    pub(crate) name: Cow<'static, str>,
    pub(crate) wire_name: String,
    pub(crate) description: Cow<'static, str>,
    pub(crate) version: Cow<'static, str>,
    pub(crate) effect: Effect,
    pub(crate) idempotent: bool,
    pub(crate) task: TaskSupport,
    pub(crate) task_start: TaskStart,
    pub(crate) timeout: Option<Duration>,
    pub(crate) tags: Vec<Cow<'static, str>>,
    pub(crate) scopes: Vec<Cow<'static, str>>,
    pub(crate) examples: Vec<Value>,
    pub(crate) deferred: bool,
    pub(crate) origin: Origin,
    pub(crate) input_schema: SchemaSource,
    pub(crate) output_schema: Option<SchemaSource>,
    pub(crate) handler: Handler,
    /// False only for compiled handlers that inject nothing: the executor then skips building a per-call context.
    pub(crate) reads_context: bool,
    /// True only for compiled handlers: they serialise their result through `__private::output`, which returns
    /// only values within the output limits the context carries (the executor's), so the executor does not check
    /// them again.
    pub(crate) output_within_limits: bool,
    /// What the handler's extractors need from the executor.
    pub(crate) requirements: Requirements,
    /// Why the parameters cannot be mapped to arguments; reported by the registry's build.
    pub(crate) problem: Option<String>,
    pub(crate) schemas: OnceLock<ToolSchemas>,
    pub(crate) compiled: OnceLock<Result<CompiledTool, String>>,
}

impl fmt::Debug for ToolDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolDefinition")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("effect", &self.effect)
            .field("idempotent", &self.idempotent)
            .field("timeout", &self.timeout)
            .field("tags", &self.tags)
            .field("deferred", &self.deferred)
            .field("origin", &self.origin)
            .field("handler", &self.handler)
            .finish_non_exhaustive()
    }
}

impl ToolDefinition {
    /// Starts a run-time definition. Name and version are checked by [`ToolDefinitionBuilder::build`].
    pub fn builder(name: impl Into<Cow<'static, str>>) -> ToolDefinitionBuilder {
        ToolDefinitionBuilder {
            name: name.into(),
            description: Cow::Borrowed(""),
            version: Cow::Borrowed("1.0"),
            effect: Effect::Read,
            idempotent: None,
            task: TaskSupport::Never,
            task_start: TaskStart::Admission,
            timeout: None,
            tags: Vec::new(),
            scopes: Vec::new(),
            examples: Vec::new(),
            deferred: false,
            source: Cow::Borrowed("builder"),
            input_schema: None,
            output_schema: None,
            handler: None,
            requirements: Requirements::new(),
        }
    }

    pub(crate) fn from_static(t: &'static StaticTool) -> ToolDefinition {
        let params = (t.params)();
        let mut requirements = Requirements::new();
        for p in &params {
            (p.requirements)(&mut requirements);
        }
        let mut problem = match (t.plan)() {
            Plan::Invalid(problem) => Some(problem.clone()),
            _ => None,
        };
        let mut examples = Vec::with_capacity(t.examples.len());
        for (index, text) in t.examples.iter().enumerate() {
            // `#[tool]` parsed each example already; this only keeps a hand-made record from panicking.
            match serde_json::from_str(text) {
                Ok(value) => examples.push(value),
                Err(e) => {
                    problem.get_or_insert_with(|| format!("its example at index {index} is not valid JSON: {e}"));
                }
            }
        }
        ToolDefinition {
            name: Cow::Borrowed(t.name),
            wire_name: name::to_wire(t.name),
            // The description is the fn's doc comment: its intra-doc links are made plain text for the model.
            description: render::plain_text(t.description),
            version: Cow::Borrowed(t.version),
            effect: t.effect,
            idempotent: t.idempotent,
            task: t.task,
            task_start: t.task_start,
            timeout: t.timeout_ms.map(Duration::from_millis),
            tags: t.tags.iter().map(|t| Cow::Borrowed(*t)).collect(),
            scopes: t.scopes.iter().map(|s| Cow::Borrowed(*s)).collect(),
            examples,
            deferred: t.deferred,
            origin: Origin::Compiled { location: t.location, fn_name: t.fn_name },
            input_schema: SchemaSource::Generated(t.input_schema),
            output_schema: Some(SchemaSource::Generated(t.output_schema)),
            handler: t.handler.clone(),
            reads_context: params.iter().any(|p| p.kind == Kind::Injected),
            output_within_limits: true,
            requirements,
            problem,
            schemas: OnceLock::new(),
            compiled: OnceLock::new(),
        }
    }

    /// The tool's name as the model and the registry know it, e.g. `incident.search`.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The name sent to providers that only accept `[A-Za-z0-9_-]{1,64}` (`incident.search` -> `incident-search`).
    pub fn wire_name(&self) -> &str {
        &self.wire_name
    }
    /// The description the model reads. For a `#[tool]`, its fn's doc comment (or `description = "..."`) with
    /// rustdoc's intra-doc links as plain text: ``Uses [`Cache`].`` reads ``Uses `Cache`.``.
    pub fn description(&self) -> &str {
        &self.description
    }
    /// `MAJOR.MINOR` or `MAJOR.MINOR.PATCH`.
    pub fn version(&self) -> &str {
        &self.version
    }
    /// `fnv1a128:` and 32 hex digits: the 128-bit FNV-1a hash of the canonical JSON of the tool's contract (its
    /// name, version, effect, argument schema and result schema). An approval kept for later
    /// ([`PendingCall`](crate::runs::PendingCall)) holds it, so that a changed contract is told from the one approved.
    pub fn contract_fingerprint(&self) -> String {
        let contract = serde_json::json!({
            "name": self.name(),
            "version": self.version(),
            "effect": self.effect().as_str(),
            "input": self.input_schema(),
            "output": self.output_schema(),
        });
        let mut h = keel_tools_schema::canonical::Fnv1a128::new();
        h.update(keel_tools_schema::canonical::canonical_json(&contract).as_bytes());
        format!("fnv1a128:{:032x}", h.finish())
    }
    /// What the tool does to the world.
    pub fn effect(&self) -> Effect {
        self.effect
    }
    /// Whether calling it twice with the same arguments has the effect of calling it once.
    pub fn idempotent(&self) -> bool {
        self.idempotent
    }
    /// Whether a call may run as a task.
    pub fn task_support(&self) -> TaskSupport {
        self.task
    }
    /// When a call that runs as a task becomes one.
    pub fn task_start(&self) -> TaskStart {
        self.task_start
    }
    /// The tool's own timeout, if it declared one.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
    /// The tool's tags.
    pub fn tags(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.tags.iter().map(|t| t.as_ref())
    }
    /// Example arguments for the model (`#[tool(example = "...")]`, [`ToolDefinitionBuilder::example`]), each a JSON
    /// object, in the order given. Anthropic takes them as the entry's `input_examples`; the other providers' entries
    /// state them at the end of the description. The registry's build validates each against the argument schema.
    pub fn examples(&self) -> &[Value] {
        &self.examples
    }
    /// Whether the tool is deferred (`#[tool(defer)]`, [`ToolDefinitionBuilder::defer`]): kept out of the list the
    /// model is shown until a search surfaces it.
    pub fn deferred(&self) -> bool {
        self.deferred
    }
    /// Whether the tool carries `tag`.
    pub fn has_tag(&self, tag: &str) -> bool {
        self.tags.iter().any(|t| t == tag)
    }
    /// The OAuth scopes a caller needs to call the tool (`#[tool(scopes = [...])]`): all of them. A caller whose
    /// granted scopes ([`CallOptions::granted_scopes`](crate::executor::CallOptions::granted_scopes)) lack one is
    /// refused `insufficient_scope`, and never shown the tool by a server that lists per caller.
    pub fn scopes(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.scopes.iter().map(|s| s.as_ref())
    }
    /// Whether a caller granted `granted` may call the tool: it holds every scope the tool needs.
    pub fn allowed_with<S: AsRef<str>>(&self, granted: &[S]) -> bool {
        self.scopes.iter().all(|needed| granted.iter().any(|g| g.as_ref() == needed))
    }
    /// Where the definition came from.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }
    /// The erased handler.
    pub fn handler(&self) -> &Handler {
        &self.handler
    }
    /// What the handler's extractors need from the executor (checked when an executor is built).
    pub fn requirements(&self) -> &Requirements {
        &self.requirements
    }
    /// The tool's schemas, generated on first use and cached.
    pub fn schemas(&self) -> &ToolSchemas {
        self.schemas.get_or_init(|| {
            ToolSchemas::new(self.input_schema.produce(), self.output_schema.as_ref().map(SchemaSource::produce))
        })
    }
    /// The canonical JSON Schema (2020-12) of the arguments.
    pub fn input_schema(&self) -> &Value {
        &self.schemas().input
    }
    /// The canonical JSON Schema (2020-12) of the result, if the tool declares one.
    pub fn output_schema(&self) -> Option<&Value> {
        self.schemas().output.as_ref()
    }

    /// A copy with another name (and so another wire name); used for namespacing and overrides.
    pub fn renamed(&self, name: impl Into<Cow<'static, str>>) -> Result<ToolDefinition, NameError> {
        let name = name.into();
        name::validate(&name)?;
        Ok(self.copy_as(name))
    }

    /// A copy marked deferred or not ([`ToolDefinition::deferred`]); used by [`ToolView::defer`](crate::ToolView::defer).
    pub fn with_deferred(&self, deferred: bool) -> ToolDefinition {
        let mut copy = self.copy_as(self.name.clone());
        copy.deferred = deferred;
        copy
    }

    /// A copy under `name`, which is valid.
    fn copy_as(&self, name: Cow<'static, str>) -> ToolDefinition {
        ToolDefinition {
            wire_name: name::to_wire(&name),
            name,
            description: self.description.clone(),
            version: self.version.clone(),
            effect: self.effect,
            idempotent: self.idempotent,
            task: self.task,
            task_start: self.task_start,
            timeout: self.timeout,
            tags: self.tags.clone(),
            scopes: self.scopes.clone(),
            examples: self.examples.clone(),
            deferred: self.deferred,
            origin: self.origin.clone(),
            input_schema: self.input_schema.clone(),
            output_schema: self.output_schema.clone(),
            handler: self.handler.clone(),
            reads_context: self.reads_context,
            output_within_limits: self.output_within_limits,
            requirements: self.requirements.clone(),
            problem: self.problem.clone(),
            // Rendered schemas carry the name, so the copy renders its own.
            schemas: OnceLock::new(),
            compiled: OnceLock::new(),
        }
    }

    /// A copy shown to the model under another contract: `name`, `description` and argument schema `input_schema`,
    /// with the stricter of `effect` and this tool's effect. Handler, version, origin, tags, timeout, idempotency,
    /// deferral and result schema stay this tool's; the examples, written for this tool's schema, are not kept.
    ///
    /// This is how a catalogue row narrows a compiled tool. The handler still deserializes what *this* tool's schema
    /// describes, so `input_schema` must accept no more than this tool's input schema; checking that is the
    /// caller's job (`keel-tools-catalog` does). Fails like [`ToolDefinitionBuilder::build`] on a bad name, an empty
    /// description or an input schema that is not an object schema.
    pub fn derived(
        &self,
        name: impl Into<Cow<'static, str>>,
        description: impl Into<Cow<'static, str>>,
        input_schema: Value,
        effect: Effect,
    ) -> Result<ToolDefinition, DefinitionError> {
        let name = name.into();
        name::validate(&name).map_err(DefinitionError::Name)?;
        let description = description.into();
        if description.trim().is_empty() {
            return Err(DefinitionError::MissingDescription(name.into_owned()));
        }
        if input_schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(DefinitionError::InputNotObject(name.into_owned()));
        }
        Ok(ToolDefinition {
            wire_name: name::to_wire(&name),
            name,
            description,
            version: self.version.clone(),
            effect: self.effect.max(effect),
            idempotent: self.idempotent,
            task: self.task,
            task_start: self.task_start,
            timeout: self.timeout,
            tags: self.tags.clone(),
            scopes: self.scopes.clone(),
            // Written for this tool's schema, which `input_schema` narrows: not carried over.
            examples: Vec::new(),
            deferred: self.deferred,
            origin: self.origin.clone(),
            input_schema: SchemaSource::Value(input_schema),
            output_schema: self.output_schema.clone(),
            handler: self.handler.clone(),
            reads_context: self.reads_context,
            output_within_limits: self.output_within_limits,
            requirements: self.requirements.clone(),
            problem: self.problem.clone(),
            schemas: OnceLock::new(),
            compiled: OnceLock::new(),
        })
    }
}

/// Builds a [`ToolDefinition`] at run time. See [`ToolDefinition::builder`].
#[must_use]
pub struct ToolDefinitionBuilder {
    name: Cow<'static, str>,
    description: Cow<'static, str>,
    version: Cow<'static, str>,
    effect: Effect,
    idempotent: Option<bool>,
    task: TaskSupport,
    task_start: TaskStart,
    timeout: Option<Duration>,
    tags: Vec<Cow<'static, str>>,
    scopes: Vec<Cow<'static, str>>,
    examples: Vec<Value>,
    deferred: bool,
    source: Cow<'static, str>,
    input_schema: Option<Value>,
    output_schema: Option<Value>,
    handler: Option<Handler>,
    requirements: Requirements,
}

/// Why a run-time definition was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DefinitionError {
    /// The name breaks the naming grammar.
    Name(NameError),
    /// The version is not `MAJOR.MINOR` or `MAJOR.MINOR.PATCH`.
    Version(String),
    /// The description is empty.
    MissingDescription(String),
    /// No handler was given.
    MissingHandler(String),
    /// The input schema is not an object schema.
    InputNotObject(String),
    /// A scope is not an OAuth scope token: `(tool, scope)`.
    Scope(String, String),
}

impl fmt::Display for DefinitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DefinitionError::Name(e) => e.fmt(f),
            DefinitionError::Version(v) => {
                write!(f, "version must be \"MAJOR.MINOR\" or \"MAJOR.MINOR.PATCH\" with numeric parts; found {v:?}")
            }
            DefinitionError::MissingDescription(n) => {
                write!(f, "tool `{n}` has no description; the model needs one to decide when to call it")
            }
            DefinitionError::MissingHandler(n) => {
                write!(f, "tool `{n}` has no handler; call .handler(..)")
            }
            DefinitionError::Scope(n, scope) => write!(
                f,
                "tool `{n}`: scope {scope:?} is not an OAuth scope token (printable ASCII without spaces, quotes or \\)"
            ),
            DefinitionError::InputNotObject(n) => write!(
                f,
                "tool `{n}`: the input schema must describe a JSON object (\"type\": \"object\"); \
                 tool arguments are always an object"
            ),
        }
    }
}

impl std::error::Error for DefinitionError {}

impl ToolDefinitionBuilder {
    /// The description the model reads (required).
    pub fn description(mut self, d: impl Into<Cow<'static, str>>) -> Self {
        self.description = d.into();
        self
    }
    /// `MAJOR.MINOR` or `MAJOR.MINOR.PATCH` (default `1.0`).
    pub fn version(mut self, v: impl Into<Cow<'static, str>>) -> Self {
        self.version = v.into();
        self
    }
    /// The effect (default [`Effect::Read`]).
    pub fn effect(mut self, e: Effect) -> Self {
        self.effect = e;
        self
    }
    /// Idempotency (default: true for read, false otherwise).
    pub fn idempotent(mut self, i: bool) -> Self {
        self.idempotent = Some(i);
        self
    }
    /// Whether a call may run as a task (default [`TaskSupport::Never`]).
    pub fn task_support(mut self, task: TaskSupport) -> Self {
        self.task = task;
        self
    }
    /// When a call that runs as a task becomes one (default [`TaskStart::Admission`]).
    pub fn task_start(mut self, start: TaskStart) -> Self {
        self.task_start = start;
        self
    }
    /// The tool's own timeout.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = Some(t);
        self
    }
    /// Adds a tag.
    pub fn tag(mut self, t: impl Into<Cow<'static, str>>) -> Self {
        self.tags.push(t.into());
        self
    }
    /// An OAuth scope a caller needs to call the tool (see [`ToolDefinition::scopes`]); checked by `build`.
    pub fn scope(mut self, s: impl Into<Cow<'static, str>>) -> Self {
        self.scopes.push(s.into());
        self
    }
    /// Adds an example of the arguments (a JSON object) for the model; see [`ToolDefinition::examples`]. The
    /// registry's build validates it against the argument schema.
    pub fn example(mut self, arguments: Value) -> Self {
        self.examples.push(arguments);
        self
    }
    /// Whether the tool is deferred (default `false`); see [`ToolDefinition::deferred`].
    pub fn defer(mut self, deferred: bool) -> Self {
        self.deferred = deferred;
        self
    }
    /// A label of who built this definition, shown in duplicate-name errors.
    pub fn source(mut self, s: impl Into<Cow<'static, str>>) -> Self {
        self.source = s.into();
        self
    }
    /// The argument schema (an object schema; default: an empty object that allows no properties).
    pub fn input_schema(mut self, s: Value) -> Self {
        self.input_schema = Some(s);
        self
    }
    /// The result schema (optional: without it results are not validated).
    pub fn output_schema(mut self, s: Value) -> Self {
        self.output_schema = Some(s);
        self
    }
    /// The handler: any `Fn(Value, CallContext) -> impl Future<Output = Result<Value, ToolError>>`, any
    /// [`DynHandler`], or an `Arc<dyn DynHandler>` shared with other definitions.
    pub fn handler(mut self, h: impl IntoDynHandler) -> Self {
        self.handler = Some(Handler::Dynamic(h.into_dyn_handler()));
        self
    }
    /// What the handler needs from the executor, e.g. the shared state it reads through
    /// [`CallContext::state`]; an executor without it fails to build.
    pub fn requirements(mut self, requirements: Requirements) -> Self {
        self.requirements = requirements;
        self
    }
    /// Checks and builds the definition.
    pub fn build(self) -> Result<ToolDefinition, DefinitionError> {
        name::validate(&self.name).map_err(DefinitionError::Name)?;
        if !name::is_valid_version(&self.version) {
            return Err(DefinitionError::Version(self.version.into_owned()));
        }
        if self.description.trim().is_empty() {
            return Err(DefinitionError::MissingDescription(self.name.into_owned()));
        }
        let handler = self.handler.ok_or_else(|| DefinitionError::MissingHandler(self.name.to_string()))?;
        let input = self
            .input_schema
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false}));
        if input.get("type").and_then(Value::as_str) != Some("object") {
            return Err(DefinitionError::InputNotObject(self.name.into_owned()));
        }
        if let Some(bad) = self.scopes.iter().find(|s| !keel_tools_names::is_valid_scope(s)) {
            return Err(DefinitionError::Scope(self.name.into_owned(), bad.to_string()));
        }
        Ok(ToolDefinition {
            wire_name: name::to_wire(&self.name),
            name: self.name,
            description: self.description,
            version: self.version,
            idempotent: self.idempotent.unwrap_or(self.effect == Effect::Read),
            task: self.task,
            task_start: self.task_start,
            effect: self.effect,
            timeout: self.timeout,
            tags: self.tags,
            scopes: self.scopes,
            examples: self.examples,
            deferred: self.deferred,
            origin: Origin::Dynamic { source: self.source },
            input_schema: SchemaSource::Value(input),
            output_schema: self.output_schema.map(SchemaSource::Value),
            handler,
            reads_context: true,
            output_within_limits: false,
            requirements: self.requirements,
            problem: None,
            schemas: OnceLock::new(),
            compiled: OnceLock::new(),
        })
    }
}

/// A tool's schemas compiled for validation; built once per definition and cached on it.
pub(crate) struct CompiledTool {
    pub(crate) input: CompiledSchema,
    pub(crate) output: Option<CompiledSchema>,
}

impl fmt::Debug for CompiledTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledTool").field("has_output", &self.output.is_some()).finish()
    }
}

pub(crate) fn compiled(def: &ToolDefinition) -> Result<&CompiledTool, &str> {
    def.compiled
        .get_or_init(|| {
            let input = def.input_schema();
            if input.get("type").and_then(Value::as_str) != Some("object") {
                return Err("the argument schema does not describe a JSON object (\"type\": \"object\"); \
                            take an args struct or named parameters"
                    .to_owned());
            }
            keel_tools_schema::vocabulary::check_mcp_headers(input).map_err(|e| format!("argument schema: {e}"))?;
            let input = CompiledSchema::compile(&def.schemas().input_for_validation())
                .map_err(|e| format!("argument schema: {e}"))?;
            let output = match def.schemas().output_for_validation() {
                Some(s) => Some(CompiledSchema::compile(&s).map_err(|e| format!("result schema: {e}"))?),
                None => None,
            };
            Ok(CompiledTool { input, output })
        })
        .as_ref()
        .map_err(String::as_str)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use schemars::JsonSchema;
    use serde::Deserialize;
    use serde_json::Value;

    use super::*;
    use crate::tool;
    use crate::tool_schemas::Provider;
    use crate::tool_schemas::fixtures::contains_key_anywhere;

    /// Which report to build, for [`report_fixture`].
    #[derive(Deserialize, JsonSchema)]
    struct ReportArgs {
        /// Include [done](crate::definition::Effect) cards too, as [`Self`] says.
        include_done: Option<bool>,
    }

    /// Builds a report from [`ReportArgs`][args]; see [the guide](https://example.com/guide).
    ///
    /// [args]: ReportArgs
    #[tool(effect = "read", version = "1.0", name = "fixture.report")]
    fn report_fixture(args: ReportArgs) -> HashMap<String, u64> {
        HashMap::from([("done".to_owned(), u64::from(args.include_done.unwrap_or(false)))])
    }

    /// Proposes a status for a card.
    #[tool(effect = "write", version = "1.0", name = "fixture.propose")]
    fn propose_fixture(#[arg(description = "The card, e.g. [`T-1`]")] card: String, status: String) -> String {
        format!("{card}: {status}")
    }

    fn compiled(name: &str) -> ToolDefinition {
        match inventory::iter::<StaticTool>.into_iter().find(|t| t.name == name) {
            Some(t) => ToolDefinition::from_static(t),
            None => panic!("no compiled tool {name}"),
        }
    }

    /// Every string in `v` (keys and values).
    fn strings(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(items) => items.iter().for_each(|i| strings(i, out)),
            Value::Object(map) => map.iter().for_each(|(k, v)| {
                out.push(k.clone());
                strings(v, out);
            }),
            _ => {}
        }
    }

    #[test]
    fn no_provider_sees_a_type_name_for_a_title() {
        for def in [compiled("fixture.report"), compiled("fixture.propose")] {
            assert!(!contains_key_anywhere(def.input_schema(), "title"), "{}", def.input_schema());
            for provider in Provider::ALL {
                let rendered = def.render(provider);
                assert!(!contains_key_anywhere(rendered, "title"), "{}: {rendered}", provider.as_str());
                let mut all = Vec::new();
                strings(rendered, &mut all);
                for name in ["__KeelArgs", "Map_of_uint64"] {
                    assert!(!all.iter().any(|s| s.contains(name)), "{}: {name} in {rendered}", provider.as_str());
                }
            }
        }
        // The result schema of a map has no made-up title either.
        let output = compiled("fixture.report").output_schema().cloned();
        assert_eq!(output.as_ref().and_then(|o| o.get("title")), None, "{output:?}");
    }

    #[test]
    fn no_provider_sees_rustdoc_links() {
        let report = compiled("fixture.report");
        assert_eq!(
            report.description(),
            "Builds a report from `ReportArgs`; see [the guide](https://example.com/guide)."
        );
        assert_eq!(report.input_schema()["description"], "Which report to build, for `report_fixture`.");
        assert_eq!(
            report.input_schema()["properties"]["include_done"]["description"],
            "Include done cards too, as `Self` says."
        );
        let propose = compiled("fixture.propose");
        assert_eq!(propose.input_schema()["properties"]["card"]["description"], "The card, e.g. `T-1`");
        for def in [report, propose] {
            for provider in Provider::ALL {
                let rendered = def.render(provider);
                let mut all = Vec::new();
                strings(rendered, &mut all);
                assert!(
                    !all.iter().any(|s| s.contains("[`") || s.contains("](crate")),
                    "{}: {rendered}",
                    provider.as_str()
                );
            }
        }
    }
}
