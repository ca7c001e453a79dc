//! [`ToolError`]: what a handler returns when it fails.
//!
//! Two kinds, kept apart on purpose (seed: a contract breach, a business failure and a bug need different owners):
//!
//! - a **business error** the tool reports on purpose, `ToolError::new("not_found", "no incident INC-9")`: its
//!   code and message reach the model as they are;
//! - an **internal error**, anything else (`?` on an `std::error::Error`, [`ToolError::internal`], a panic): the
//!   model sees only `tool_internal_error` and a generic message; the detail goes to a `tracing` event tagged with
//!   the call id.

use std::borrow::Cow;
use std::fmt;

use serde_json::Value;

/// Codes the executor itself produces. A tool that reports one of them is treated as an internal error, so the
/// model can always trust that, e.g., `unknown_tool` came from the executor.
pub const RESERVED_CODES: &[&str] = &[
    "unknown_tool",
    "invalid_arguments",
    "approval_required",
    "tool_internal_error",
    "invalid_tool_output",
    "timeout",
    "cancelled",
    "not_executed",
];

/// A failure reported by a tool handler.
///
/// `ToolError` deliberately does not implement `std::error::Error`, so that any error type converts into it with
/// `?` (as an internal error) while business errors are built explicitly.
pub struct ToolError {
    pub(crate) repr: Repr,
}

pub(crate) enum Repr {
    Business {
        code: Cow<'static, str>,
        message: Cow<'static, str>,
        details: Option<Value>,
    },
    Internal(Box<dyn std::error::Error + Send + Sync + 'static>),
    /// The arguments passed the schema but did not deserialize into the handler's types.
    ArgumentsMismatch(String),
}

impl ToolError {
    /// A business error with a stable, tool-chosen code (`snake_case`, e.g. `not_found`) and a message for the model.
    pub fn new(code: impl Into<Cow<'static, str>>, message: impl Into<Cow<'static, str>>) -> ToolError {
        ToolError { repr: Repr::Business { code: code.into(), message: message.into(), details: None } }
    }

    /// Attaches structured details (any JSON) to a business error. Ignored on internal errors.
    pub fn with_details(mut self, details: Value) -> ToolError {
        if let Repr::Business { details: d, .. } = &mut self.repr {
            *d = Some(details);
        }
        self
    }

    /// An internal error: the model sees `tool_internal_error`; `err` goes to the log only.
    pub fn internal(err: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> ToolError {
        ToolError { repr: Repr::Internal(err.into()) }
    }

    #[doc(hidden)]
    pub fn arguments_mismatch(detail: impl fmt::Display) -> ToolError {
        ToolError { repr: Repr::ArgumentsMismatch(detail.to_string()) }
    }

    /// The code the model will see.
    pub fn code(&self) -> &str {
        match &self.repr {
            Repr::Business { code, .. } => code,
            Repr::Internal(_) => "tool_internal_error",
            Repr::ArgumentsMismatch(_) => "invalid_arguments",
        }
    }

    /// Whether this is a business error the tool reported on purpose.
    pub fn is_business(&self) -> bool {
        matches!(self.repr, Repr::Business { .. })
    }
}

/// Whether `code` may be used by a tool: `snake_case`, 1-64 characters, not one of [`RESERVED_CODES`].
pub fn is_valid_tool_code(code: &str) -> bool {
    let b = code.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
        && !RESERVED_CODES.contains(&code)
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ToolError {
    fn from(err: E) -> ToolError {
        ToolError::internal(err)
    }
}

impl fmt::Debug for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Business { code, message, details } => f
                .debug_struct("ToolError")
                .field("code", code)
                .field("message", message)
                .field("details", details)
                .finish(),
            Repr::Internal(e) => f.debug_tuple("ToolError::Internal").field(e).finish(),
            Repr::ArgumentsMismatch(d) => f.debug_tuple("ToolError::ArgumentsMismatch").field(d).finish(),
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Business { code, message, .. } => write!(f, "{code}: {message}"),
            Repr::Internal(e) => write!(f, "tool_internal_error: {e}"),
            Repr::ArgumentsMismatch(d) => write!(f, "invalid_arguments: {d}"),
        }
    }
}
