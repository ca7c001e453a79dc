//! What a handler can ask the client for while it runs: the user's input (elicitation), a completion from the
//! client's LLM (sampling), the client's roots. A [`CallContext`](crate::CallContext) asks through the
//! [`ClientInput`] its transport installed ([`CallOptions::client_input`](crate::executor::CallOptions::client_input));
//! a call without one (in process, from a model) gets [`InputError::Unavailable`].
//!
//! Two ways to answer, one handler code:
//!
//! * **In a session** (MCP up to 2025-11-25), the request goes to the client and the handler waits for the answer.
//! * **Stateless** (MCP 2026-07-28), nothing can be sent back mid-call: an unanswered request ends the call with
//!   [`InputError::Pending`] (propagate it with `?`), the transport answers the client with the requests the call
//!   made, and the client retries the call with the answers. The handler then runs again *from the start*: each
//!   request whose answer came back returns it at once, so the handler reaches the point it stopped at. Whatever a
//!   handler did before its first unanswered request it does again on every round; keep side effects after the
//!   last request, or make them idempotent ([`CallContext::idempotency_key`](crate::CallContext::idempotency_key)).
//!   Requests made concurrently (`tokio::join!`) go to the client in one round.
//!
//! Every request has a key, unique within the call: it is how a retried call finds its answer.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use crate::error::{ToolCode, ToolError};

/// A boxed future of a client's answer.
pub type InputFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, InputError>> + Send + 'a>>;

/// What kind of input a request asks for; each needs its own client capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InputKind {
    /// The user's answer to a form (MCP `elicitation/create`, capability `elicitation`).
    Elicitation,
    /// A completion from the client's LLM (MCP `sampling/createMessage`, capability `sampling`).
    Sampling,
    /// The client's roots (MCP `roots/list`, capability `roots`).
    Roots,
}

impl InputKind {
    /// The capability's name: `elicitation`, `sampling` or `roots`.
    pub fn as_str(self) -> &'static str {
        match self {
            InputKind::Elicitation => "elicitation",
            InputKind::Sampling => "sampling",
            InputKind::Roots => "roots",
        }
    }
}

impl fmt::Display for InputKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One request to the client.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum InputRequest {
    /// Ask the user: a message and the JSON Schema of the answer (MCP: a flat object of primitive properties).
    Elicit {
        /// What the user is asked.
        message: String,
        /// The schema of the answer's `content`.
        schema: Value,
    },
    /// Ask the client's LLM: the parameters of MCP's `sampling/createMessage` (`messages`, `maxTokens`, ...).
    Sample(Value),
    /// Ask for the client's roots.
    Roots,
}

impl InputRequest {
    /// The kind of input asked for.
    pub fn kind(&self) -> InputKind {
        match self {
            InputRequest::Elicit { .. } => InputKind::Elicitation,
            InputRequest::Sample(_) => InputKind::Sampling,
            InputRequest::Roots => InputKind::Roots,
        }
    }
}

/// Why a request got no answer.
///
/// Like [`ToolError`], it does not implement `std::error::Error`, so that `?` in a handler turns it into a
/// business error with its own code (see [`InputError::code`]) and not an internal error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InputError {
    /// Nobody to ask: the call did not come through a transport that can ask its client.
    Unavailable,
    /// The client did not declare the capability this request needs. Over MCP 2026-07-28 the call then ends with
    /// the JSON-RPC error `-32021` (missing required client capability) naming it; in a session, the handler's
    /// error is the call's result.
    Unsupported(InputKind),
    /// The answer is not here yet (stateless transports): end the call with this error (`?`); it resumes when the
    /// client retries with the answer.
    Pending,
    /// The key is empty, or was already used for another request of this call.
    BadKey(String),
    /// The client failed to answer, or its answer is not of the request's shape.
    Failed(String),
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::Unavailable => f.write_str("this call cannot ask its client for input"),
            InputError::Unsupported(kind) => write!(f, "the client does not support {kind}"),
            InputError::Pending => f.write_str("the call waits for the client's input"),
            InputError::BadKey(key) => write!(f, "input key {key:?} is empty or already used in this call"),
            InputError::Failed(why) => write!(f, "the client did not answer: {why}"),
        }
    }
}

impl InputError {
    /// The stable code the error has as a tool's result: `input_unavailable`, `client_capability_missing`,
    /// `input_required`, `input_key_invalid` or `input_failed`.
    pub fn code(&self) -> &'static str {
        self.tool_code().0
    }

    /// The code, checked at compile time.
    fn tool_code(&self) -> (&'static str, ToolCode) {
        const UNAVAILABLE: ToolCode = ToolCode::from_static("input_unavailable");
        const UNSUPPORTED: ToolCode = ToolCode::from_static("client_capability_missing");
        const PENDING: ToolCode = ToolCode::from_static("input_required");
        const BAD_KEY: ToolCode = ToolCode::from_static("input_key_invalid");
        const FAILED: ToolCode = ToolCode::from_static("input_failed");
        match self {
            InputError::Unavailable => ("input_unavailable", UNAVAILABLE),
            InputError::Unsupported(_) => ("client_capability_missing", UNSUPPORTED),
            InputError::Pending => ("input_required", PENDING),
            InputError::BadKey(_) => ("input_key_invalid", BAD_KEY),
            InputError::Failed(_) => ("input_failed", FAILED),
        }
    }
}

/// A business error with the input error's code and message: what the model reads when the transport does not turn
/// it into a protocol answer (an input-required result, `-32021`).
impl From<InputError> for ToolError {
    fn from(e: InputError) -> ToolError {
        let (_, code) = e.tool_code();
        let mut error = ToolError::new(code, e.to_string());
        if let InputError::Unsupported(kind) = e {
            error = error.with_details(serde_json::json!({"capability": kind.as_str()}));
        }
        error
    }
}

/// The user's answer to an elicitation.
#[derive(Debug, Clone, PartialEq)]
pub struct Elicitation {
    /// `accept`, `decline` or `cancel`.
    pub action: String,
    /// The answer (an object of the requested schema) when the user accepted.
    pub content: Option<Value>,
}

impl Elicitation {
    /// Reads an MCP `ElicitResult` (`{"action": ..., "content": ...}`).
    pub fn from_value(value: &Value) -> Result<Elicitation, InputError> {
        let action = value
            .get("action")
            .and_then(Value::as_str)
            .ok_or_else(|| InputError::Failed("the elicitation answer has no `action`".to_owned()))?;
        Ok(Elicitation { action: action.to_owned(), content: value.get("content").filter(|c| !c.is_null()).cloned() })
    }

    /// Whether the user accepted.
    pub fn accepted(&self) -> bool {
        self.action == "accept"
    }
}

/// How a call asks its client for input: installed per call by the transport (an MCP session, a stateless MCP
/// request, a test).
pub trait ClientInput: Send + Sync + 'static {
    /// Whether the client declared the capability `kind` needs.
    fn supports(&self, kind: InputKind) -> bool;
    /// Asks the client; the answer is the client's result as JSON (an `ElicitResult`, a `CreateMessageResult`, a
    /// `ListRootsResult`).
    fn request(&self, key: &str, request: InputRequest) -> InputFuture<'_>;
    /// The state the handler kept in an earlier round of this call ([`ClientInput::set_state`]); always `None` in
    /// a session, where a call runs once.
    fn state(&self) -> Option<Value> {
        None
    }
    /// Keeps `state` for the next round of this call (stateless transports carry it to the client and back,
    /// tamper-checked); ignored in a session.
    fn set_state(&self, state: Value) {
        let _ = state;
    }
    /// Makes the call a task from now on, if the transport runs it as one (see
    /// [`CallContext::begin_task`](crate::CallContext::begin_task)); returns whether the call is a task.
    fn begin_task(&self) -> bool {
        false
    }
}
