//! What a handler can ask for besides its arguments: the per-call [`CallContext`] and shared [`State<T>`].

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::ToolError;
use crate::input::{ClientInput, Elicitation, InputError, InputKind, InputRequest};
use keel_tools_schema::Limits;
use keel_tools_schema::canonical::Fnv1a128;

/// Shared application state of type `T`, registered once on the executor (`.state(value)`) and handed to every
/// handler that declares a `State<T>` parameter. Cloning is an `Arc` clone.
pub struct State<T: ?Sized>(pub Arc<T>);

impl<T: ?Sized> Clone for State<T> {
    fn clone(&self) -> Self {
        State(self.0.clone())
    }
}

impl<T: ?Sized> Deref for State<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for State<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("State").field(&&*self.0).finish()
    }
}

/// A type-keyed map of shared state.
#[derive(Clone, Default)]
pub struct StateMap {
    map: HashMap<TypeId, (Arc<dyn Any + Send + Sync>, &'static str)>,
}

impl StateMap {
    /// An empty map.
    pub fn new() -> StateMap {
        StateMap::default()
    }
    /// Inserts `value`, replacing any earlier value of the same type.
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        self.insert_arc(Arc::new(value));
    }
    /// Inserts an already shared value.
    pub fn insert_arc<T: Send + Sync + 'static>(&mut self, value: Arc<T>) {
        self.map.insert(TypeId::of::<T>(), (value, type_name::<T>()));
    }
    /// The value of type `T`, if present.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.map.get(&TypeId::of::<T>()).and_then(|(v, _)| v.clone().downcast::<T>().ok())
    }
    /// Whether a value with this type id is present.
    pub fn contains(&self, id: TypeId) -> bool {
        self.map.contains_key(&id)
    }
}

impl fmt::Debug for StateMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.map.values().map(|(_, n)| n)).finish()
    }
}

/// Log levels a handler can emit through [`CallContext::log`] (the MCP/syslog set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    #[allow(missing_docs)]
    Debug,
    #[allow(missing_docs)]
    Info,
    #[allow(missing_docs)]
    Notice,
    #[allow(missing_docs)]
    Warning,
    #[allow(missing_docs)]
    Error,
    #[allow(missing_docs)]
    Critical,
    #[allow(missing_docs)]
    Alert,
    #[allow(missing_docs)]
    Emergency,
}

/// Where a call's log messages and progress go (an MCP session, a test probe). The default drops them.
pub trait Notifier: Send + Sync + 'static {
    /// A log message from the handler.
    fn log(&self, level: LogLevel, logger: Option<&str>, data: Value);
    /// A progress report from the handler.
    fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>);
}

struct Inner {
    call_id: Arc<str>,
    tool_name: Arc<str>,
    tenant: Option<Arc<str>>,
    principal: Option<Arc<str>>,
    /// The stream of requests the call came on, as its idempotency key sees it.
    stream: Option<Arc<str>>,
    /// Given, or derived when first asked for.
    idempotency_key: OnceLock<Arc<str>>,
    /// What the handler's result may hold (the executor's output limits), used as it is serialised.
    output_limits: Limits,
    cancellation: CancellationToken,
    state: Arc<StateMap>,
    notifier: Option<Arc<dyn Notifier>>,
    input: Option<Arc<dyn ClientInput>>,
    /// The input keys asked for so far (each may be asked once per call).
    input_keys: Mutex<Vec<String>>,
    /// The lease the call runs under, when its tool runs once.
    effect_lease: Option<crate::lease::Lease>,
}

/// What a handler can ask for besides its arguments: the per-call [`CallContext`] and shared [`State<T>`].
///
/// Any parameter whose type implements [`FromCallContext`] is filled from the call instead of the model's
/// arguments and never appears in a schema; [`Args<T>`] marks the whole-struct argument form. What an extractor
/// needs ([`Requirements`]) is checked when the executor is built, so a missing state fails there, naming the
/// tool and the type, never per call.
///
/// The per-call context: call id, tool name, tenant, cancellation, shared state and notifications.
///
/// Declare a `CallContext` parameter on a `#[tool]` fn to receive it. Cloning is cheap.
#[derive(Clone)]
pub struct CallContext {
    inner: Arc<Inner>,
}

impl fmt::Debug for CallContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallContext")
            .field("call_id", &self.inner.call_id)
            .field("tool_name", &self.inner.tool_name)
            .field("tenant", &self.inner.tenant)
            .field("principal", &self.inner.principal)
            .finish_non_exhaustive()
    }
}

impl CallContext {
    /// Builds a context (the executor does this for every call; tests may too).
    pub fn new(call_id: impl Into<Arc<str>>, tool_name: impl Into<Arc<str>>) -> CallContext {
        CallContext::builder(call_id, tool_name).build()
    }

    /// A builder for a context with tenant, state, cancellation and notifier.
    pub fn builder(call_id: impl Into<Arc<str>>, tool_name: impl Into<Arc<str>>) -> CallContextBuilder {
        CallContextBuilder {
            call_id: call_id.into(),
            tool_name: tool_name.into(),
            tenant: None,
            principal: None,
            stream: None,
            idempotency_key: None,
            output_limits: Limits::OUTPUT_DEFAULT,
            cancellation: None,
            state: None,
            notifier: None,
            input: None,
            effect_lease: None,
        }
    }

    /// The id of the call being served.
    pub fn call_id(&self) -> &str {
        &self.inner.call_id
    }
    /// The name of the tool being called.
    pub fn tool_name(&self) -> &str {
        &self.inner.tool_name
    }
    /// The tenant the call runs for, if any.
    pub fn tenant(&self) -> Option<&str> {
        self.inner.tenant.as_deref()
    }
    /// Who the call is made for within its tenant (a user, an API client), if the caller said
    /// ([`CallOptions::principal`](crate::executor::CallOptions::principal)).
    pub fn principal(&self) -> Option<&str> {
        self.inner.principal.as_deref()
    }
    /// A key naming this call's effect, for a tool that must not do it twice. `ik-` and 32 hex digits, from a
    /// stable 128-bit hash (the same in every process and version).
    ///
    /// Two calls share a key exactly when they have the same tool, call id, tenant, principal and stream (the
    /// stream of requests the call came on: [`CallOptions::stream`](crate::executor::CallOptions::stream)). A call id
    /// is unique only within its stream (a JSON-RPC id restarts in every MCP session, an id keel generates for a
    /// provider that sends none restarts in every conversation), so within one stream a repeated call id is a retry of
    /// the same call (a transport's retry, a replayed transcript, a run resumed with its stream after a restart), and
    /// calls on two streams, or for two tenants or principals, never share a key. That is what makes it safe to answer
    /// a repeated key with the first attempt's result: the caller who gets it is the caller who made the first attempt.
    ///
    /// * Every keel transport names the stream: each MCP session (stdio, HTTP, any transport) is one, and each
    ///   stateless MCP request is one of its own (see `keel-tools-mcp`'s server).
    /// * A call made with no stream whose id the host chose (`Executor::call_with` from the host's own code) is
    ///   keyed by tenant, principal, tool and call id: the host owns its ids, and a call id it reuses is the same
    ///   call. With no principal either, the key is the one keel derived before streams existed.
    /// * A call made with no stream whose id keel generated
    ///   ([`ToolCall::is_generated_id`](crate::ToolCall::is_generated_id): the provider sent none, and such ids
    ///   repeat from one conversation to the next) gets a key no call made with another
    ///   [`CallOptions`](crate::executor::CallOptions) value shares, a clone included. A [`Run`](crate::runs::Run) (and
    ///   so the agent loop) makes its calls with its own value, and a run never repeats a call id: such a key is never
    ///   shared. A conversation resumed after a restart gets new keys for them, unless it names its stream.
    ///
    /// The key does not depend on the arguments, so a retry is recognised even when the model spelled its
    /// arguments differently. A side-effecting tool records the key with its effect (a column with a unique
    /// index, an `Idempotency-Key` header to the API it calls) and answers a repeated key with the first
    /// attempt's result. The key is also in the details of a `timeout` or `cancelled` result whose handler may
    /// still be running.
    pub fn idempotency_key(&self) -> &str {
        let inner = &*self.inner;
        inner.idempotency_key.get_or_init(|| {
            let scope = KeyScope {
                tenant: inner.tenant.as_deref(),
                principal: inner.principal.as_deref(),
                stream: inner.stream.as_deref(),
            };
            idempotency_key(scope, &inner.tool_name, &inner.call_id).into()
        })
    }
    /// Cancelled when the call times out (at the deadline, before the grace period: see
    /// [`ExecutorBuilder::timeout_grace`](crate::executor::ExecutorBuilder::timeout_grace)), the run is cancelled or
    /// the client goes away.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.inner.cancellation
    }
    /// The limits the handler's result is serialised within.
    pub(crate) fn output_limits(&self) -> Limits {
        self.inner.output_limits
    }
    /// Whether the call has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancellation.is_cancelled()
    }
    /// Shared state of type `T`, if the executor holds one.
    pub fn state<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.inner.state.get::<T>()
    }
    /// Sends a log message to the caller (an MCP client, a probe); dropped when nobody listens.
    pub fn log(&self, level: LogLevel, data: impl Into<Value>) {
        if let Some(n) = &self.inner.notifier {
            n.log(level, Some(&self.inner.tool_name), data.into());
        }
    }
    /// Reports progress to the caller; dropped when nobody listens.
    pub fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        if let Some(n) = &self.inner.notifier {
            n.progress(progress, total, message);
        }
    }

    /// Whether the client can answer requests of `kind` (it declared the capability). `false` when the call cannot
    /// ask its client at all.
    pub fn supports_input(&self, kind: InputKind) -> bool {
        self.inner.input.as_ref().is_some_and(|i| i.supports(kind))
    }

    /// Asks the client for input; see [the input module](crate::context::ClientInput) for how a session and a stateless
    /// transport answer. `key` names the request within the call (unique, non-empty). Propagate
    /// [`InputError::Pending`] with `?`: the call ends and resumes when the client answers.
    pub async fn ask(&self, key: &str, request: InputRequest) -> Result<Value, InputError> {
        let Some(input) = &self.inner.input else { return Err(InputError::Unavailable) };
        {
            let mut keys = self.inner.input_keys.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if key.is_empty() || keys.iter().any(|k| k == key) {
                return Err(InputError::BadKey(key.to_owned()));
            }
            keys.push(key.to_owned());
        }
        input.request(key, request).await
    }

    /// Asks the user to fill in a form: `message`, and the JSON Schema of the answer (a flat object of primitive
    /// properties). See [`CallContext::ask`].
    pub async fn elicit(
        &self,
        key: &str,
        message: impl Into<String>,
        schema: Value,
    ) -> Result<Elicitation, InputError> {
        let answer = self.ask(key, InputRequest::Elicit { message: message.into(), schema }).await?;
        Elicitation::from_value(&answer)
    }

    /// Asks the client's LLM for a completion: `params` are MCP's `sampling/createMessage` parameters
    /// (`messages`, `maxTokens`, ...); the answer is its `CreateMessageResult`. See [`CallContext::ask`].
    pub async fn sample(&self, key: &str, params: Value) -> Result<Value, InputError> {
        self.ask(key, InputRequest::Sample(params)).await
    }

    /// Asks for the client's roots; the answer is its `ListRootsResult` (`{"roots": [{"uri": ...}, ...]}`). See
    /// [`CallContext::ask`].
    pub async fn roots(&self, key: &str) -> Result<Value, InputError> {
        self.ask(key, InputRequest::Roots).await
    }

    /// The state this call kept in an earlier round ([`CallContext::set_round_state`]): stateless transports run
    /// a call again when the client answers, and carry this from one round to the next, tamper-checked. `None` on
    /// the first round and in a session.
    pub fn round_state(&self) -> Option<Value> {
        self.inner.input.as_ref().and_then(|i| i.state())
    }

    /// The lease this call runs under, when its tool runs once ([`crate::once`]): its key is the call's record in
    /// the executor's effect ledger. A handler that writes to the ledger's own database records its result in the
    /// same transaction as its effect (keel-tools-state's `SqliteEffectStore::finish_in` and
    /// `PostgresEffectStore::finish_in`), so that the effect and the record are committed together or not at all.
    /// `None` for a tool that does not run once.
    pub fn effect_lease(&self) -> Option<&crate::lease::Lease> {
        self.inner.effect_lease.as_ref()
    }

    /// Makes the call a task from here on: the transport answers the client with the task now and the handler goes
    /// on in it (MCP: the client polls `tasks/get`; input asked for from now on is answered through
    /// `tasks/update`). For a tool declared `#[tool(task = "...", task_start = "handler")]`, which first gathers
    /// input in the request itself; other task tools become tasks as soon as they are admitted. Returns whether
    /// the call is a task now: `false` when its client or transport does not run it as one, and it simply goes on.
    pub fn begin_task(&self) -> bool {
        self.inner.input.as_ref().is_some_and(|i| i.begin_task())
    }

    /// Keeps `state` for the call's next round (see [`CallContext::round_state`]); ignored in a session.
    pub fn set_round_state(&self, state: Value) {
        if let Some(input) = &self.inner.input {
            input.set_state(state);
        }
    }
}

/// Builds a [`CallContext`].
#[must_use]
pub struct CallContextBuilder {
    call_id: Arc<str>,
    tool_name: Arc<str>,
    tenant: Option<Arc<str>>,
    principal: Option<Arc<str>>,
    stream: Option<Arc<str>>,
    idempotency_key: Option<Arc<str>>,
    output_limits: Limits,
    cancellation: Option<CancellationToken>,
    state: Option<Arc<StateMap>>,
    notifier: Option<Arc<dyn Notifier>>,
    input: Option<Arc<dyn ClientInput>>,
    effect_lease: Option<crate::lease::Lease>,
}

impl CallContextBuilder {
    /// The tenant.
    pub fn tenant(mut self, tenant: Option<Arc<str>>) -> Self {
        self.tenant = tenant;
        self
    }
    /// Who the call is made for within its tenant.
    pub fn principal(mut self, principal: Option<Arc<str>>) -> Self {
        self.principal = principal;
        self
    }
    /// The stream of requests the call came on (see [`CallContext::idempotency_key`]).
    pub fn stream(mut self, stream: Option<Arc<str>>) -> Self {
        self.stream = stream;
        self
    }
    /// The idempotency key (default: derived from the tenant, principal, stream, tool and call id, as
    /// [`CallContext::idempotency_key`] says).
    pub fn idempotency_key(mut self, key: impl Into<Arc<str>>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }
    /// The output limits the handler's result is serialised within (default [`Limits::OUTPUT_DEFAULT`]).
    pub(crate) fn output_limits(mut self, limits: Limits) -> Self {
        self.output_limits = limits;
        self
    }
    /// The cancellation token (default: a fresh one).
    pub fn cancellation(mut self, token: CancellationToken) -> Self {
        self.cancellation = Some(token);
        self
    }
    /// The shared state.
    pub fn state(mut self, state: Arc<StateMap>) -> Self {
        self.state = Some(state);
        self
    }
    /// Where log messages and progress go.
    pub fn notifier(mut self, notifier: Option<Arc<dyn Notifier>>) -> Self {
        self.notifier = notifier;
        self
    }
    /// How the handler asks its client for input.
    pub fn client_input(mut self, input: Option<Arc<dyn ClientInput>>) -> Self {
        self.input = input;
        self
    }
    /// The lease the call runs under in an effect ledger (see [`CallContext::effect_lease`]).
    pub fn effect_lease(mut self, lease: Option<crate::lease::Lease>) -> Self {
        self.effect_lease = lease;
        self
    }
    /// Builds the context.
    pub fn build(self) -> CallContext {
        let idempotency_key = OnceLock::new();
        if let Some(key) = self.idempotency_key {
            let _ = idempotency_key.set(key);
        }
        CallContext {
            inner: Arc::new(Inner {
                call_id: self.call_id,
                tool_name: self.tool_name,
                idempotency_key,
                output_limits: self.output_limits,
                tenant: self.tenant,
                principal: self.principal,
                stream: self.stream,
                cancellation: self.cancellation.unwrap_or_default(),
                state: self.state.unwrap_or_default(),
                notifier: self.notifier,
                input: self.input,
                input_keys: Mutex::new(Vec::new()),
                effect_lease: self.effect_lease,
            }),
        }
    }
}

/// What a call's idempotency key is derived from besides its tool and call id.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct KeyScope<'a> {
    pub(crate) tenant: Option<&'a str>,
    pub(crate) principal: Option<&'a str>,
    pub(crate) stream: Option<&'a str>,
}

/// One part of a key's hash, length-prefixed so that no two tuples write the same bytes.
fn key_part(h: &mut Fnv1a128, part: &str) {
    h.update(&(part.len() as u64).to_le_bytes());
    h.update(part.as_bytes());
}

/// The key [`CallContext::idempotency_key`] documents: a stable 128-bit hash of the tenant, principal and stream
/// (each with whether it is there), the tool and the call id, each part length-prefixed so that no two tuples
/// write the same bytes. With neither principal nor stream, it is version 1 of the key (tenant, tool, call id),
/// so that keys stored before streams existed still name their calls.
pub(crate) fn idempotency_key(scope: KeyScope<'_>, tool: &str, call_id: &str) -> String {
    let mut h = Fnv1a128::new();
    if scope.principal.is_none() && scope.stream.is_none() {
        h.update(b"keel-idempotency-key-1");
        h.update(&[u8::from(scope.tenant.is_some())]);
        key_part(&mut h, scope.tenant.unwrap_or(""));
    } else {
        h.update(b"keel-idempotency-key-2");
        for who in [scope.tenant, scope.principal, scope.stream] {
            h.update(&[u8::from(who.is_some())]);
            key_part(&mut h, who.unwrap_or(""));
        }
    }
    key_part(&mut h, tool);
    key_part(&mut h, call_id);
    format!("ik-{:032x}", h.finish())
}

/// The key of a call whose caller gave its own idempotency key: version 3, from the tenant and principal (each
/// with whether it is there), the tool and the given key; never equal to a key of version 1 or 2.
pub(crate) fn given_idempotency_key(scope: KeyScope<'_>, tool: &str, given: &str) -> String {
    let mut h = Fnv1a128::new();
    h.update(b"keel-idempotency-key-3");
    for who in [scope.tenant, scope.principal] {
        h.update(&[u8::from(who.is_some())]);
        key_part(&mut h, who.unwrap_or(""));
    }
    key_part(&mut h, tool);
    key_part(&mut h, given);
    format!("ik-{:032x}", h.finish())
}

/// What an extractor needs from the executor, declared so that [`Executor`](crate::Executor) building fails, naming
/// the tool and the type, instead of every call failing later.
///
/// An extractor declares its needs in [`FromCallContext::requirements`]; the executor checks them all when it is
/// built.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requirements {
    states: Vec<(TypeId, &'static str)>,
}

impl Requirements {
    /// No requirements.
    pub fn new() -> Requirements {
        Requirements::default()
    }
    /// Requires shared state of type `T` (registered with `ExecutorBuilder::state`).
    pub fn state<T: Send + Sync + 'static>(&mut self) {
        let id = TypeId::of::<T>();
        if !self.states.iter().any(|(t, _)| *t == id) {
            self.states.push((id, type_name::<T>()));
        }
    }
    /// Adds everything `other` requires.
    pub fn extend(&mut self, other: &Requirements) {
        for (id, name) in &other.states {
            if !self.states.iter().any(|(t, _)| t == id) {
                self.states.push((*id, name));
            }
        }
    }
    /// Whether nothing is required.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }
    /// The type names of the required states that `state` does not hold.
    pub fn missing_states(&self, state: &StateMap) -> Vec<&'static str> {
        self.states.iter().filter(|(id, _)| !state.contains(*id)).map(|(_, name)| *name).collect()
    }
}

/// A handler parameter filled from the call instead of the model's arguments: keel's extractor.
///
/// `#[tool]` decides a parameter's role by this trait, not by how its type is spelled: a parameter whose type
/// implements `FromCallContext` is injected (whatever alias or import names it), every other parameter is a tool
/// argument. [`CallContext`] and [`State<T>`] implement it; so can your own types:
///
/// ```
/// use keel_tools_core::{CallContext, ToolError};
/// use keel_tools_core::context::{FromCallContext, Requirements};
///
/// /// The tenant a call runs for; calls without one are refused before the handler runs.
/// struct Tenant(String);
///
/// impl FromCallContext for Tenant {
///     fn from_call_context(ctx: &CallContext) -> Result<Self, ToolError> {
///         match ctx.tenant() {
///             Some(t) => Ok(Tenant(t.to_owned())),
///             None => Err(keel_tools_core::tool_error!("tenant_required", "this tool runs only for a tenant")),
///         }
///     }
/// }
/// ```
///
/// An extractor that needs something from the executor declares it in [`requirements`](Self::requirements), so
/// that a missing piece fails the executor's build rather than each call.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be injected into a #[tool] handler",
    label = "not an injectable parameter",
    note = "injected parameters implement `FromCallContext` (as `CallContext` and `State<T>` do); every other \
            parameter is a tool argument"
)]
pub trait FromCallContext: Sized {
    /// Extracts the value. An error ends the call before the handler runs (`executed: false`): a business error
    /// as it is, anything else as `tool_internal_error`.
    fn from_call_context(ctx: &CallContext) -> Result<Self, ToolError>;

    /// What this extractor needs from the executor (default: nothing). `State<T>` requires a `T`.
    fn requirements(requirements: &mut Requirements) {
        let _ = requirements;
    }
}

impl FromCallContext for CallContext {
    fn from_call_context(ctx: &CallContext) -> Result<Self, ToolError> {
        Ok(ctx.clone())
    }
}

/// Raised when a handler asks for state the executor was not given. The executor's build checks every tool's
/// requirements, so this is reached only by contexts built by hand.
#[derive(Debug)]
pub struct MissingState(pub &'static str);

impl fmt::Display for MissingState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no shared state of type `{}` was registered on the executor; add it with `.state(..)`", self.0)
    }
}

impl std::error::Error for MissingState {}

impl<T: Send + Sync + 'static> FromCallContext for State<T> {
    fn from_call_context(ctx: &CallContext) -> Result<Self, ToolError> {
        ctx.state::<T>().map(State).ok_or_else(|| ToolError::internal(MissingState(type_name::<T>())))
    }

    fn requirements(requirements: &mut Requirements) {
        requirements.state::<T>();
    }
}

impl<T: Send + Sync + 'static> FromCallContext for Option<State<T>> {
    fn from_call_context(ctx: &CallContext) -> Result<Self, ToolError> {
        Ok(ctx.state::<T>().map(State))
    }
}

/// The whole of the model's arguments as one struct: `fn f(Args(query): Args<Query>)`.
///
/// A lone argument parameter whose type is a struct is already taken as the args struct; `Args<T>` says so
/// explicitly, whatever `T`'s schema looks like, and lets the parameter be a pattern (`Args(Query { text, limit }):
/// Args<Query>`). A tool with an `Args<T>` parameter has no other argument parameters (injected ones are fine); the
/// registry's build refuses one that does. The schema must still describe an object, as every tool's arguments do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Args<T>(pub T);

impl<T> Deref for Args<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(tenant: Option<&str>, principal: Option<&str>, stream: Option<&str>, tool: &str, id: &str) -> String {
        idempotency_key(KeyScope { tenant, principal, stream }, tool, id)
    }

    #[test]
    fn the_idempotency_key_is_pinned() {
        // The key is stored with effects by tools: it must never change for the same call. Without a principal or
        // a stream it is the first version's key.
        let first = key(Some("acme"), None, None, "ticket.create", "call_1");
        assert_eq!(first, "ik-3bbf9bb6bcbf2693c9931bbcccba19b0");
        assert_ne!(
            key(None, None, None, "ticket.create", "call_1"),
            key(Some(""), None, None, "ticket.create", "call_1")
        );
        // Length prefixes: moving a boundary between parts changes the key.
        assert_ne!(key(None, None, None, "ab", "c"), key(None, None, None, "a", "bc"));
        let ctx = CallContext::builder("call_1", "ticket.create").tenant(Some("acme".into())).build();
        assert_eq!(ctx.idempotency_key(), first);
        assert_eq!(CallContext::builder("c", "t").idempotency_key("mine").build().idempotency_key(), "mine");
    }

    #[test]
    fn a_stream_or_a_principal_keeps_keys_apart() {
        let on = |stream: &str| key(Some("acme"), None, Some(stream), "ticket.create", "7");
        assert_eq!(on("session-a"), "ik-6029c96808645364932a183dd3ee9c77");
        // Two streams with the same call id: two keys; the same stream again: the same key.
        assert_ne!(on("session-a"), on("session-b"));
        assert_eq!(on("session-a"), on("session-a"));
        assert_ne!(on("session-a"), key(Some("acme"), None, None, "ticket.create", "7"));
        // A principal is a part of its own: not the same as a stream, nor as a tenant, of the same text.
        let alice = key(Some("acme"), Some("alice"), None, "t", "7");
        assert_ne!(alice, key(Some("acme"), None, Some("alice"), "t", "7"));
        assert_ne!(alice, key(Some("acme"), Some("bob"), None, "t", "7"));
        assert_ne!(key(Some("alice"), None, Some("s"), "t", "7"), key(None, Some("alice"), Some("s"), "t", "7"));
        assert_ne!(key(None, Some(""), None, "t", "7"), key(None, None, Some(""), "t", "7"));
        let ctx = CallContext::builder("7", "ticket.create")
            .tenant(Some("acme".into()))
            .stream(Some("session-a".into()))
            .build();
        assert_eq!(ctx.idempotency_key(), on("session-a"));
    }
}
