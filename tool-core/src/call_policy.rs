//! Which calls may run: the effect/approval policy, step 3 of the executor's order.

use std::collections::HashSet;
use std::fmt;

use serde_json::Value;

use crate::effect::Effect;
use crate::tool_definition::ToolDefinition;
use keel_tools_schema::canonical::canonical_json;

/// A human's (or a higher authority's) consent to run one tool with one set of arguments.
///
/// The whole round trip: the call stops at `approval_required`, whose details say what to approve; a person
/// approves exactly that; the same call runs with the approval.
///
/// ```
/// use serde_json::json;
/// use keel_tools_core::{tool, Approval, Executor, Registry, ToolCall};
/// use keel_tools_core::executor::CallOptions;
///
/// /// Close an incident.
/// #[tool(effect = "write", version = "1.0")]
/// fn close_incident(incident_id: String) -> String {
///     format!("{incident_id} closed")
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let view = Registry::from_inventory().unwrap().view().names(["close_incident"]).build().unwrap();
/// let executor = Executor::new(view).unwrap();
/// let call = || ToolCall::new("c1", "close_incident", json!({"incident_id": "INC-7"}));
///
/// // 1. Without an approval the handler does not run.
/// let stopped = executor.call(call()).await;
/// assert_eq!(stopped.code(), Some("approval_required"));
/// assert!(!stopped.executed);
/// let what = &stopped.error().unwrap().details.as_ref().unwrap()["approve"];
/// assert_eq!(what["tool"], "close_incident");
///
/// // 2. A person approves exactly that tool with exactly those arguments.
/// let approval = Approval::new(what["tool"].as_str().unwrap(), &what["arguments"]);
///
/// // 3. The same call, with the approval, runs.
/// let done = executor.call_with(call(), &CallOptions::new().approve(approval.clone())).await;
/// assert_eq!(done.data(), Some(&json!("INC-7 closed")));
///
/// // The approval is bound to the arguments: another incident is not approved.
/// let other = ToolCall::new("c2", "close_incident", json!({"incident_id": "INC-8"}));
/// let refused = executor.call_with(other, &CallOptions::new().approve(approval)).await;
/// assert_eq!(refused.code(), Some("approval_required"));
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct Approval {
    tool: String,
    arguments: Value,
    canonical: String,
}

impl PartialEq for Approval {
    fn eq(&self, other: &Approval) -> bool {
        self.tool == other.tool && self.canonical == other.canonical
    }
}

impl Eq for Approval {}

impl std::hash::Hash for Approval {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.tool.hash(state);
        self.canonical.hash(state);
    }
}

impl Approval {
    /// Approves `tool` with exactly `arguments`.
    ///
    /// The arguments are compared with the call's in the tool's canonical form
    /// ([`ToolDefinition::canonical_arguments`]) and as canonical JSON, so an approval made from the arguments
    /// exactly as the model sent them (with a strict-mode `null`, a spelled-out default, keys in any order)
    /// approves that call, and an approval of the `details.approve.arguments` of an `approval_required` answer
    /// does too.
    pub fn new(tool: impl Into<String>, arguments: &Value) -> Approval {
        Approval { tool: tool.into(), arguments: arguments.clone(), canonical: canonical_json(arguments) }
    }
    /// The approved tool.
    pub fn tool(&self) -> &str {
        &self.tool
    }
    /// The approved arguments, as given.
    pub fn arguments(&self) -> &Value {
        &self.arguments
    }
    /// The canonical JSON of the approved arguments, as given.
    pub fn canonical_arguments(&self) -> &str {
        &self.canonical
    }
}

/// The approvals a call carries.
#[derive(Debug, Clone, Default)]
pub struct Approvals {
    set: HashSet<Approval>,
}

impl Approvals {
    /// No approvals.
    pub fn new() -> Approvals {
        Approvals::default()
    }
    /// Adds an approval.
    pub fn grant(&mut self, approval: Approval) -> &mut Self {
        self.set.insert(approval);
        self
    }
    /// Adds an approval (builder style).
    pub fn with(mut self, approval: Approval) -> Self {
        self.set.insert(approval);
        self
    }
    /// Whether `tool` with `arguments` (in its canonical form, as the executor passes them to a policy) is
    /// approved: some approval for the tool whose arguments, brought into the tool's canonical form, are the same.
    pub fn approves(&self, tool: &ToolDefinition, arguments: &Value) -> bool {
        if self.set.is_empty() {
            return false;
        }
        let wanted = canonical_json(arguments);
        self.set.iter().any(|a| {
            a.tool == tool.name()
                && (a.canonical == wanted || {
                    let mut approved = a.arguments.clone();
                    tool.canonical_arguments(&mut approved) > 0 && canonical_json(&approved) == wanted
                })
        })
    }
    /// Whether there are no approvals.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

impl FromIterator<Approval> for Approvals {
    fn from_iter<I: IntoIterator<Item = Approval>>(iter: I) -> Self {
        Approvals { set: iter.into_iter().collect() }
    }
}

/// What a policy is asked about.
#[derive(Debug, Clone, Copy)]
pub struct PolicyRequest<'a> {
    /// The tool.
    pub tool: &'a ToolDefinition,
    /// The arguments, in the tool's canonical form ([`ToolDefinition::canonical_arguments`]) and valid against
    /// its schema.
    pub arguments: &'a Value,
    /// The tenant of the call.
    pub tenant: Option<&'a str>,
    /// The approvals the call carries.
    pub approvals: &'a Approvals,
}

/// A policy's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PolicyDecision {
    /// Run the handler.
    Allow,
    /// Do not run it now: `approval_required`. The reason is shown to the model and the harness.
    RequireApproval {
        /// Why, e.g. "create_ticket changes state (effect: write)".
        reason: String,
    },
    /// Never run it for this caller: `policy_denied`.
    Deny {
        /// Why, e.g. "tenant `acme` may not use destructive tools".
        reason: String,
    },
}

/// Which calls may run: the effect/approval policy, step 3 of the executor's order.
///
/// The default [`EffectPolicy`] lets `read` tools run and stops `write` and `destructive` tools with
/// `approval_required` unless the call carries an [`Approval`] for *exactly* that tool and those arguments: an
/// approval is bound to the arguments in the tool's canonical form ([`ToolDefinition::canonical_arguments`]),
/// compared as canonical JSON (keys sorted, no whitespace), so a grant for `{"ticket": "A"}` does not approve
/// `{"ticket": "B"}`, while `{"ticket": "A", "note": null}` and `{"ticket": "A"}` are the same call.
///
/// Implement [`Policy`] for per-tenant rules; it sees the definition, the validated arguments, the tenant and the
/// approvals of the call.
///
/// Decides whether a validated call may run.
pub trait Policy: Send + Sync + 'static {
    /// The decision for one call. Must not block.
    fn decide(&self, request: &PolicyRequest<'_>) -> PolicyDecision;

    /// Whether calls of `tool` may overlap with other calls of the same batch, in a [`Run`](crate::runs::Run) that
    /// allows concurrency ([`Concurrency`](crate::runs::Concurrency)). Default: only `read` tools. A tool that is not
    /// parallel-safe runs alone, after the calls before it and before the calls after it.
    fn parallel_safe(&self, tool: &ToolDefinition) -> bool {
        tool.effect() == Effect::Read
    }
}

/// A policy shared between executors: `.policy(Arc::clone(&shared))`.
impl Policy for std::sync::Arc<dyn Policy> {
    fn decide(&self, request: &PolicyRequest<'_>) -> PolicyDecision {
        (**self).decide(request)
    }
    fn parallel_safe(&self, tool: &ToolDefinition) -> bool {
        (**self).parallel_safe(tool)
    }
}

impl<F> Policy for F
where
    F: Fn(&PolicyRequest<'_>) -> PolicyDecision + Send + Sync + 'static,
{
    fn decide(&self, request: &PolicyRequest<'_>) -> PolicyDecision {
        self(request)
    }
}

/// The default policy: `read` runs; `write` and `destructive` need an [`Approval`] for the exact arguments.
#[derive(Debug, Clone, Copy, Default)]
pub struct EffectPolicy;

impl Policy for EffectPolicy {
    fn decide(&self, r: &PolicyRequest<'_>) -> PolicyDecision {
        match r.tool.effect() {
            Effect::Read => PolicyDecision::Allow,
            _ if r.approvals.approves(r.tool, r.arguments) => PolicyDecision::Allow,
            effect => PolicyDecision::RequireApproval {
                reason: format!(
                    "`{}` has effect `{effect}`; it runs only with an approval for these exact arguments",
                    r.tool.name()
                ),
            },
        }
    }
}

impl fmt::Display for PolicyDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyDecision::Allow => f.write_str("allow"),
            PolicyDecision::RequireApproval { reason } => write!(f, "approval required: {reason}"),
            PolicyDecision::Deny { reason } => write!(f, "denied: {reason}"),
        }
    }
}
