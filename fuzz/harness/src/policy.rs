//! The policy: the default effect policy, a tenant-based denial, and a record of every decision.

use keel_tools_core::policy::{EffectPolicy, Policy, PolicyDecision, PolicyRequest};

use crate::oracle::Oracle;
use crate::record::{Decided, with_record};

/// Tenants ending with this are denied everything.
pub const DENY_SUFFIX: &str = "/deny";

pub(crate) struct RecordingPolicy;

impl Policy for RecordingPolicy {
    fn decide(&self, r: &PolicyRequest<'_>) -> PolicyDecision {
        let decision = if r.tenant.is_some_and(|t| t.ends_with(DENY_SUFFIX)) {
            PolicyDecision::Deny { reason: "this tenant may not use tools".into() }
        } else {
            EffectPolicy.decide(r)
        };
        let decided = match decision {
            PolicyDecision::Allow => Decided::Allow,
            PolicyDecision::RequireApproval { .. } => Decided::Approval,
            PolicyDecision::Deny { .. } => Decided::Deny,
            other => unreachable!("a policy decision this harness does not model: {other:?}"),
        };
        // JSON Schema validity: a compiled tool's integral float (`5.0`) is valid here and refused later, when the
        // handler converts its arguments.
        let valid = Oracle::new(r.tool.input_schema(), false).valid_strict(r.arguments);
        with_record(r.tenant, |rec| rec.policy.push((r.tool.name().to_owned(), decided, valid)));
        decision
    }
}
