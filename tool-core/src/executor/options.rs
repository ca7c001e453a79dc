//! [`CallOptions`]: what one call is given besides its arguments, and the idempotency keys they bind.

use std::fmt;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::call_context::Notifier;
use crate::call_policy::{Approval, Approvals};
use crate::input::ClientInput;

/// Per-call inputs that do not come from the model: whom the call is for (tenant, principal) and the stream of
/// requests it came on, approvals, cancellation, notifications.
///
/// ```
/// use keel_tools_core::{tool, CallContext, Executor, Registry, ToolCall};
/// use keel_tools_core::executor::{CallOptions, CancellationToken};
///
/// /// Says whom the call runs for.
/// #[tool(effect = "read", version = "1.0")]
/// fn whoami(ctx: CallContext) -> String {
///     ctx.tenant().unwrap_or("nobody").to_owned()
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let executor = Executor::new(Registry::from_inventory().unwrap().view().names(["whoami"]).build().unwrap()).unwrap();
/// let stop = CancellationToken::new(); // cancelling it cancels the call
/// let options = CallOptions::new().tenant("acme").cancellation(stop.clone());
/// let r = executor.call_with(ToolCall::new("c1", "whoami", serde_json::json!({})), &options).await;
/// assert_eq!(r.data(), Some(&serde_json::json!("acme")));
/// # });
/// ```
///
/// Cloning copies everything but one thing: a value and its clone are two streams for calls whose id keel generated
/// and that name no stream (see [`CallOptions::stream`]).
#[derive(Clone, Default)]
pub struct CallOptions {
    pub(super) tenant: Option<Arc<str>>,
    pub(super) principal: Option<Arc<str>>,
    pub(super) stream: Option<Arc<str>>,
    pub(super) unnamed_stream: UnnamedStream,
    pub(super) approvals: Approvals,
    pub(super) cancellation: Option<CancellationToken>,
    pub(super) notifier: Option<Arc<dyn Notifier>>,
    pub(super) input: Option<Arc<dyn ClientInput>>,
    pub(super) admitted: Option<Arc<dyn Fn() + Send + Sync>>,
    pub(super) granted_scopes: Option<Arc<[Arc<str>]>>,
    pub(super) allowed_tools: Option<Arc<[Arc<str>]>>,
    pub(super) given_key: Option<Arc<str>>,
    pub(super) caller_scope: Option<Arc<str>>,
}

impl fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallOptions")
            .field("tenant", &self.tenant)
            .field("principal", &self.principal)
            .field("stream", &self.stream)
            .field("caller_scope", &self.caller_scope)
            .field("approvals", &self.approvals)
            .field("allowed_tools", &self.allowed_tools)
            .finish_non_exhaustive()
    }
}

impl CallOptions {
    /// No tenant, no principal, no stream, no approvals.
    pub fn new() -> CallOptions {
        CallOptions::default()
    }
    /// The tenant the call runs for.
    pub fn tenant(mut self, tenant: impl Into<Arc<str>>) -> Self {
        self.tenant = Some(tenant.into());
        self
    }
    /// Who the call is made for within its tenant: the authenticated user or client, as the host knows it
    /// ([`CallContext::principal`](crate::CallContext::principal)). Part of the call's idempotency key, and of
    /// what an MCP `requestState` is bound to.
    pub fn principal(mut self, principal: impl Into<Arc<str>>) -> Self {
        self.principal = Some(principal.into());
        self
    }
    /// The stream of requests the call came on: the scope within which its call id names one call (an MCP
    /// session, one conversation of an agent loop). Calls on two streams never share an idempotency key; a
    /// retry on the same stream under the same call id keeps its key. See
    /// [`CallContext::idempotency_key`](crate::CallContext::idempotency_key) for the whole rule.
    ///
    /// Every keel transport sets one. A host sets one for each conversation it drives itself, and stores it with the
    /// conversation to keep its keys across a restart. Without one, a call whose id the host chose is keyed by its
    /// tenant, principal, tool and call id (the host owns its ids), and a call whose id keel generated
    /// ([`ToolCall::is_generated_id`](crate::ToolCall::is_generated_id): the provider sent none, and such ids repeat
    /// from one conversation to the next) is keyed to this `CallOptions` value: a key no call made with another value
    /// shares, not even with a clone of this one. A [`Run`](crate::runs::Run) makes its calls with its own value;
    /// [`Executor::call`](crate::Executor::call) makes every call with the same one, so give it no generated ids of two
    /// conversations.
    pub fn stream(mut self, stream: impl Into<Arc<str>>) -> Self {
        self.stream = Some(stream.into());
        self
    }
    /// The caller's own idempotency key for the call (an HTTP `Idempotency-Key` header, an MCP request's
    /// `_meta` `keel/idempotencyKey`): the call's key is derived from it, the tool and whose keys it is among (its
    /// tenant, principal and [caller scope](CallOptions::caller_scope)), and not from its stream or call id, so
    /// that a retry made on another connection, by another replica, as the same caller is the same call. Two
    /// tenants, two principals or two caller scopes never share a key. Give it to one call only.
    ///
    /// A call with neither tenant, principal nor caller scope has no caller to bind its key to, and a key any
    /// anonymous caller could name would let one replay another's recorded result, learn which keys exist, or
    /// claim another's key first. Such a key is bound to the call's [stream](CallOptions::stream) instead (an MCP
    /// session): it names one call within that stream only, and a retry on another stream is another call. (With
    /// no stream either, it is bound to this `CallOptions` value, as a generated call id is.) A host whose callers
    /// are anonymous and must retry across connections gives each a caller scope it can trust.
    pub fn idempotency_key(mut self, key: impl Into<Arc<str>>) -> Self {
        self.given_key = Some(key.into());
        self
    }
    /// Whose idempotency keys the call's are, for a caller the host knows by neither tenant nor principal: an MCP
    /// session's id, a client id the host authenticated by other means. Part of the key derived from a caller's own
    /// key ([`CallOptions::idempotency_key`]), beside the tenant and principal: callers of two scopes never meet
    /// in the key space, and a retry in the same scope, on any stream or replica, is the same call. Without it,
    /// a call without tenant or principal has its key bound to its stream.
    pub fn caller_scope(mut self, scope: impl Into<Arc<str>>) -> Self {
        self.caller_scope = Some(scope.into());
        self
    }
    /// The scope set with [`CallOptions::caller_scope`], if any.
    pub fn get_caller_scope(&self) -> Option<&str> {
        self.caller_scope.as_deref()
    }
    /// The key given with [`CallOptions::idempotency_key`].
    pub fn get_idempotency_key(&self) -> Option<&str> {
        self.given_key.as_deref()
    }
    /// The tenant set with [`CallOptions::tenant`], if any.
    pub fn get_tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }
    /// The principal set with [`CallOptions::principal`], if any.
    pub fn get_principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }
    /// The OAuth scopes the caller was granted (by its access token): a tool that needs a scope not among them
    /// ([`ToolDefinition::scopes`](crate::definition::ToolDefinition::scopes)) is refused `insufficient_scope`, before
    /// the policy, and never runs. Without it (a host's own call, a transport without authentication) no scope is
    /// checked.
    pub fn granted_scopes(mut self, scopes: impl IntoIterator<Item = impl Into<Arc<str>>>) -> Self {
        self.granted_scopes = Some(scopes.into_iter().map(Into::into).collect());
        self
    }
    /// Only these tools of the view may be called: a call of any other is refused exactly as a call of a tool the
    /// view does not hold (`unknown_tool`, not executed), though the tool is in the view and the model may have been
    /// shown it. Without it every tool of the view may be called.
    ///
    /// For a restriction that holds for one model turn only, as an agent loop makes with a tool choice that allows
    /// a subset of the tools it shows (so that the list it sends, and the provider's prompt cache, stay the same),
    /// see [`Run::process_batch_allowed`](crate::runs::Run::process_batch_allowed).
    ///
    /// ```
    /// # use keel_tools_core::{tool, Executor, Registry, ToolCall};
    /// # use keel_tools_core::executor::CallOptions;
    /// /// Reads the weather.
    /// #[tool(effect = "read", version = "1.0")]
    /// fn weather_now(city: String) -> String { format!("sunny in {city}") }
    /// /// Reads the time.
    /// #[tool(effect = "read", version = "1.0")]
    /// fn time_now() -> String { "noon".into() }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let view = Registry::from_inventory().unwrap().view().names(["weather_now", "time_now"]).build().unwrap();
    /// let executor = Executor::new(view).unwrap();
    /// let options = CallOptions::new().allowed_tools(["time_now"]);
    /// let refused = executor.call_with(ToolCall::new("c1", "weather_now", serde_json::json!({"city": "Oslo"})), &options).await;
    /// assert_eq!(refused.code(), Some("unknown_tool"));
    /// assert!(!refused.executed);
    /// let ran = executor.call_with(ToolCall::new("c2", "time_now", serde_json::json!({})), &options).await;
    /// assert!(ran.is_ok());
    /// # });
    /// ```
    pub fn allowed_tools(mut self, names: impl IntoIterator<Item = impl Into<Arc<str>>>) -> Self {
        self.allowed_tools = Some(names.into_iter().map(Into::into).collect());
        self
    }
    /// The tools set with [`CallOptions::allowed_tools`], if any.
    pub fn get_allowed_tools(&self) -> Option<&[Arc<str>]> {
        self.allowed_tools.as_deref()
    }
    /// Whether these options let a call name the tool `name` ([`CallOptions::allowed_tools`]).
    #[inline]
    pub(crate) fn permits(&self, name: &str) -> bool {
        self.allowed_tools.as_deref().is_none_or(|allowed| allowed.iter().any(|a| **a == *name))
    }
    /// The scopes set with [`CallOptions::granted_scopes`], if any.
    pub fn get_granted_scopes(&self) -> Option<&[Arc<str>]> {
        self.granted_scopes.as_deref()
    }
    /// The stream set with [`CallOptions::stream`], if any.
    pub fn get_stream(&self) -> Option<&str> {
        self.stream.as_deref()
    }
    /// Adds an approval for one tool and exact arguments.
    pub fn approve(mut self, approval: Approval) -> Self {
        self.approvals.grant(approval);
        self
    }
    /// Replaces the approvals.
    pub fn approvals(mut self, approvals: Approvals) -> Self {
        self.approvals = approvals;
        self
    }
    /// A parent cancellation token: cancelling it cancels the call.
    pub fn cancellation(mut self, token: CancellationToken) -> Self {
        self.cancellation = Some(token);
        self
    }
    /// Where the handler's log messages and progress go.
    pub fn notifier(mut self, notifier: Arc<dyn Notifier>) -> Self {
        self.notifier = Some(notifier);
        self
    }
    /// How the handler asks its client for input ([`CallContext::ask`](crate::CallContext::ask)); without it, a
    /// request fails with [`InputError::Unavailable`](crate::context::InputError::Unavailable).
    pub fn client_input(mut self, input: Arc<dyn ClientInput>) -> Self {
        self.input = Some(input);
        self
    }
    /// Called once the call has passed every check before its handler (registered, arguments valid, policy),
    /// just before the handler runs; never for a call refused before it. A transport uses it to answer its caller
    /// early, e.g. with an MCP task that the running call completes.
    pub fn on_admitted(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.admitted = Some(Arc::new(f));
        self
    }
    /// The parent cancellation token, if one was given.
    pub(crate) fn cancellation_token(&self) -> Option<&CancellationToken> {
        self.cancellation.as_ref()
    }
    /// The stream a call's idempotency key is derived with: the one given, else for an id keel generated (which
    /// names a call only within its conversation) this value's own, else none.
    pub(crate) fn key_stream(&self, call_id: &str) -> Option<Arc<str>> {
        match &self.stream {
            Some(stream) => Some(stream.clone()),
            None if crate::call::is_generated_call_id(call_id) => {
                Some(format!("keel-unnamed-stream/{:032x}", self.unnamed_stream.0).into())
            }
            None => None,
        }
    }
    /// The idempotency key of a call of `tool` with `call_id` made with these options: the key its handler's
    /// context has ([`CallContext::idempotency_key`](crate::CallContext::idempotency_key)).
    pub(crate) fn key_for(&self, tool: &str, call_id: &str) -> String {
        if let Some(given) = &self.given_key {
            let (tenant, principal) = (self.tenant.as_deref(), self.principal.as_deref());
            let unnamed;
            let bound = match &self.caller_scope {
                Some(scope) => KeyBound::Scope(scope),
                // As keys were bound before caller scopes (version 3).
                None if tenant.is_some() || principal.is_some() => {
                    let scope = crate::call_context::KeyScope { tenant, principal, stream: None };
                    return crate::call_context::given_idempotency_key(scope, tool, given);
                }
                None => match &self.stream {
                    Some(stream) => KeyBound::Stream(stream),
                    None => {
                        unnamed = format!("keel-unnamed-stream/{:032x}", self.unnamed_stream.0);
                        KeyBound::Stream(&unnamed)
                    }
                },
            };
            return bound_given_key(tenant, principal, bound, tool, given);
        }
        let stream = self.key_stream(call_id);
        let scope = crate::call_context::KeyScope {
            tenant: self.tenant.as_deref(),
            principal: self.principal.as_deref(),
            stream: stream.as_deref(),
        };
        crate::call_context::idempotency_key(scope, tool, call_id)
    }
}

/// What a caller's own idempotency key is bound to besides its tenant and principal.
pub(super) enum KeyBound<'a> {
    /// The caller's scope ([`CallOptions::caller_scope`]).
    Scope(&'a str),
    /// The call's stream, for a caller of no tenant, principal or scope.
    Stream(&'a str),
}

/// The key of a call whose caller gave its own key with a caller scope, or with neither tenant, principal nor
/// scope: version 4, the SHA-256 of the tenant and principal (each with whether it is there), the scope or the
/// stream (tagged, so that a scope never names a stream's keys), the tool and the given key, each part
/// length-prefixed, cut to 128 bits. Never equal to a key of versions 1 to 3.
pub(super) fn bound_given_key(
    tenant: Option<&str>,
    principal: Option<&str>,
    bound: KeyBound<'_>,
    tool: &str,
    given: &str,
) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    let mut part = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    part(b"keel-idempotency-key-4");
    for who in [tenant, principal] {
        part(&[u8::from(who.is_some())]);
        part(who.unwrap_or("").as_bytes());
    }
    let (tag, bound) = match bound {
        KeyBound::Scope(scope) => (&b"scope"[..], scope),
        KeyBound::Stream(stream) => (&b"stream"[..], stream),
    };
    part(tag);
    part(bound.as_bytes());
    part(tool.as_bytes());
    part(given.as_bytes());
    let digest = h.finalize();
    let mut key = String::with_capacity(35);
    key.push_str("ik-");
    for b in &digest[..16] {
        use std::fmt::Write as _;
        let _ = write!(key, "{b:02x}");
    }
    key
}

/// The stream of the calls made with one [`CallOptions`] value that names none: random, and new for every value,
/// a clone included, so that two conversations never share it by accident. It needs no secrecy, only to differ:
/// the process's keyed hasher gives 128 bits without a system call.
pub(super) struct UnnamedStream(u128);

impl Default for UnnamedStream {
    fn default() -> UnnamedStream {
        use std::hash::BuildHasher as _;
        let hasher = std::collections::hash_map::RandomState::new();
        UnnamedStream((u128::from(hasher.hash_one(0u8)) << 64) | u128::from(hasher.hash_one(1u8)))
    }
}

impl Clone for UnnamedStream {
    fn clone(&self) -> UnnamedStream {
        UnnamedStream::default()
    }
}
