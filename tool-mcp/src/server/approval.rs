//! [`ApprovalRules`]: how a server answers a call its executor stops for a person's approval.

use std::collections::BTreeSet;
use std::sync::Arc;

use keel_tools_core::Approval;
use keel_tools_core::ToolResult;
use keel_tools_core::context::InputRequest;
use keel_tools_core::definition::{Effect, ToolDefinition};
use keel_tools_core::executor::CallOptions;
use keel_tools_core::results::{ErrorBody, ErrorCode};
use serde_json::{Value, json};

/// How an [`McpServer`](super::McpServer) answers a `tools/call` that its executor stops with `approval_required`
/// (under the default policy, every call of a `write` or `destructive` tool that carries no approval for its exact
/// arguments). Set with [`McpServerBuilder::approvals`](super::McpServerBuilder::approvals).
///
/// The default approves nothing and asks nobody: such a call is answered `approval_required`, and its handler
/// does not run.
///
/// * **Elicitation** ([`ApprovalRules::elicit`]): when the client declared the `elicitation` capability, the
///   server asks the person at the client with a form of no fields (`elicitation/create`) whose message names
///   the tool and its effect and shows its exact arguments (in the tool's canonical form, as pretty JSON). On
///   `accept`, the call runs once, approved for exactly those arguments
///   ([`Approval::new`]`(tool, arguments)`); on `decline` or `cancel`, nothing runs and the model reads
///   `approval_denied` (a tool error result, `isError: true`, whose details say `"action": "decline"` or
///   `"cancel"`). A client without the capability, or one that fails to answer, gets `approval_required` as
///   without elicitation.
///
///   In a session (protocol up to 2025-11-25) the client is asked there and then, while the call waits. A
///   stateless request (2026-07-28) is answered with an input-required result (as for a handler's own
///   questions): one request, under the key [`APPROVAL_INPUT_KEY`], and a sealed `requestState` bound to the
///   tool, its arguments and the caller; the retry with the person's answer runs the call, or is refused. An
///   answer to a question the server did not ask (no `requestState` that records it) is not taken: the person is
///   asked.
/// * **Allowed tools** ([`ApprovalRules::allow_tool`]): every call of that tool is approved for its own
///   arguments without asking, whatever its effect.
/// * **Allowed writes** ([`ApprovalRules::allow_writes`]): every call of a `write` tool is approved without
///   asking. `destructive` tools never are by effect: name each one, or let the person approve each call.
///
/// An approval added here is what a caller's [`CallOptions::approve`] adds: the executor's policy still decides
/// (a custom [`Policy`](keel_tools_core::policy::Policy) may refuse an approved call), and the arguments are still
/// validated first.
///
/// Elicitation trusts the client: the server can only ask the client to ask its person, and takes its answer.
/// Serve it to hosts that show the question to a person (Claude Desktop, VS Code, ...), not to an unattended
/// client that could answer `accept` by itself.
///
/// ```no_run
/// use keel_tools_core::{Executor, Registry};
/// use keel_tools_mcp::McpServer;
/// use keel_tools_mcp::server::ApprovalRules;
///
/// # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
/// let registry = Registry::from_inventory()?;
/// let executor = Executor::new(registry.view().build()?)?;
/// // Ask the person about every call that needs an approval, except `add_note`'s, which always runs.
/// let server = McpServer::builder(executor)
///     .approvals(ApprovalRules::elicit().allow_tool("add_note"))
///     .build()?;
/// server.serve_stdio().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct ApprovalRules {
    elicit: bool,
    tools: BTreeSet<Arc<str>>,
    writes: bool,
}

/// The key of the approval question in a stateless call's `inputRequests` (and of its answer in the retry's
/// `inputResponses`).
pub const APPROVAL_INPUT_KEY: &str = "keel/approval";

impl ApprovalRules {
    /// Approves nothing and asks nobody: calls that need an approval are answered `approval_required` (the
    /// default).
    pub fn new() -> ApprovalRules {
        ApprovalRules::default()
    }

    /// Asks the person at the client through elicitation (see [`ApprovalRules`]).
    pub fn elicit() -> ApprovalRules {
        ApprovalRules { elicit: true, ..ApprovalRules::default() }
    }

    /// Whether to ask the person through elicitation.
    pub fn elicitation(mut self, on: bool) -> ApprovalRules {
        self.elicit = on;
        self
    }

    /// Approves every call of the tool `name`, with whatever arguments, without asking; any effect,
    /// `destructive` included.
    pub fn allow_tool(mut self, name: impl Into<Arc<str>>) -> ApprovalRules {
        self.tools.insert(name.into());
        self
    }

    /// Approves every call of every `write` tool without asking. Never a `destructive` one: those are approved
    /// by name ([`ApprovalRules::allow_tool`]) or call by call.
    pub fn allow_writes(mut self) -> ApprovalRules {
        self.writes = true;
        self
    }

    /// Whether the person is asked through elicitation.
    pub fn elicits(&self) -> bool {
        self.elicit
    }

    /// The tools approved by name.
    pub fn allowed_tools(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| &**t)
    }

    /// Whether every `write` tool is approved.
    pub fn allows_writes(&self) -> bool {
        self.writes
    }

    /// Whether every call of `tool` is approved without asking.
    pub fn allows(&self, tool: &ToolDefinition) -> bool {
        (self.writes && tool.effect() == Effect::Write) || self.tools.contains(tool.name())
    }

    /// `options` with an approval for this call when a rule allows its tool.
    pub(super) fn pre_approve(
        &self,
        tool: Option<&ToolDefinition>,
        name: &str,
        arguments: &Value,
        options: CallOptions,
    ) -> CallOptions {
        match tool {
            Some(def) if self.allows(def) => options.approve(Approval::new(name, arguments)),
            _ => options,
        }
    }
}

/// What a person answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    Accept,
    Decline,
    Cancel,
}

impl Answer {
    /// The action of an `ElicitResult`; `None` when it has none that MCP defines.
    pub(crate) fn of(result: &Value) -> Option<Answer> {
        match result.get("action")?.as_str()? {
            "accept" => Some(Answer::Accept),
            "decline" => Some(Answer::Decline),
            "cancel" => Some(Answer::Cancel),
            _ => None,
        }
    }
}

/// The approval an `approval_required` result asks for: the tool, its effect and the arguments to approve (in the
/// tool's canonical form).
pub(crate) struct Wanted<'a> {
    pub(crate) tool: &'a str,
    effect: &'a str,
    pub(crate) arguments: &'a Value,
}

/// What `result` asks the person to approve; `None` unless it is an `approval_required` answer.
pub(crate) fn wanted(result: &ToolResult) -> Option<Wanted<'_>> {
    if result.executed {
        return None;
    }
    let error = result.error().filter(|e| e.code == ErrorCode::ApprovalRequired)?;
    let details = error.details.as_ref()?;
    Some(Wanted {
        tool: details.pointer("/approve/tool")?.as_str()?,
        effect: details.get("effect").and_then(Value::as_str).unwrap_or("unstated"),
        arguments: details.pointer("/approve/arguments")?,
    })
}

impl Wanted<'_> {
    /// The form that asks the person: a message with the tool, its effect and its exact arguments, and no fields
    /// (accept or decline is the answer).
    pub(crate) fn question(&self) -> InputRequest {
        let arguments = serde_json::to_string_pretty(self.arguments).unwrap_or_else(|_| self.arguments.to_string());
        let message = format!(
            "Approve a call of `{tool}` (effect: {effect})?\n\nArguments:\n{arguments}\n\nAccept runs it once, with \
             exactly these arguments. Decline, and it does not run.",
            tool = self.tool,
            effect = self.effect,
        );
        InputRequest::Elicit { message, schema: json!({"type": "object", "properties": {}}) }
    }
}

/// The answer to the model when the person declined (or dismissed) the approval: `approval_denied`, and the call
/// did not run.
pub(crate) fn refusal(call_id: impl Into<String>, tool: &str, version: Option<&str>, answer: Answer) -> ToolResult {
    let (action, message) = match answer {
        Answer::Cancel => {
            ("cancel", format!("the person dismissed the approval of this call of `{tool}`; it did not run"))
        }
        _ => ("decline", format!("the person declined this call of `{tool}`; it did not run")),
    };
    let body = ErrorBody::new(ErrorCode::ApprovalDenied, message).with_details(json!({"action": action}));
    ToolResult::failure(call_id, tool, version.map(|v| v.to_owned().into()), false, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_from_the_action_only() {
        assert_eq!(Answer::of(&json!({"action": "accept"})), Some(Answer::Accept));
        assert_eq!(Answer::of(&json!({"action": "decline", "content": {}})), Some(Answer::Decline));
        assert_eq!(Answer::of(&json!({"action": "cancel"})), Some(Answer::Cancel));
        for other in [json!({}), json!({"action": "ACCEPT"}), json!({"action": true}), json!("accept"), json!(null)] {
            assert_eq!(Answer::of(&other), None, "{other}");
        }
    }

    #[test]
    fn a_refusal_is_approval_denied_and_did_not_run() {
        let r = refusal("c1", "t", Some("1.0"), Answer::Decline);
        assert_eq!(r.code(), Some("approval_denied"));
        assert!(!r.executed);
        assert_eq!(r.error().unwrap().details, Some(json!({"action": "decline"})));
        let r = refusal("c1", "t", None, Answer::Cancel);
        assert_eq!(r.error().unwrap().details, Some(json!({"action": "cancel"})));
    }
}
