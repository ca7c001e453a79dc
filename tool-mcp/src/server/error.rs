//! Why a server could not be built, or stopped serving.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use keel_tools_core::results::same_error;

/// One tool whose `tools/list` entry is not a valid MCP tool. Two entries are equal when their tools are and their
/// sources read the same.
#[derive(Debug, Clone)]
pub struct InvalidToolEntry {
    /// The tool.
    pub tool: String,
    /// Why the SDK refused the entry: the error of reading it as the SDK's `Tool` (a `serde_json::Error`).
    pub source: Arc<dyn Error + Send + Sync + 'static>,
}

impl fmt::Display for InvalidToolEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tool `{}`: not a valid MCP tool entry: {}", self.tool, self.source)
    }
}

impl Error for InvalidToolEntry {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.source)
    }
}

impl PartialEq for InvalidToolEntry {
    fn eq(&self, other: &InvalidToolEntry) -> bool {
        self.tool == other.tool && same_error(&*self.source, &*other.source)
    }
}

impl Eq for InvalidToolEntry {}

/// A problem that is not a tool's: what is wrong, and the error it comes from when there is one.
#[derive(Debug, Clone)]
pub(super) struct OtherProblem {
    pub(super) message: String,
    pub(super) source: Option<Arc<dyn Error + Send + Sync + 'static>>,
}

impl OtherProblem {
    /// A problem found by the builder itself.
    pub(super) fn new(message: impl Into<String>) -> OtherProblem {
        OtherProblem { message: message.into(), source: None }
    }

    /// A problem that comes from `source`.
    pub(super) fn from(message: impl Into<String>, source: impl Error + Send + Sync + 'static) -> OtherProblem {
        OtherProblem { message: message.into(), source: Some(Arc::new(source)) }
    }
}

impl PartialEq for OtherProblem {
    fn eq(&self, other: &OtherProblem) -> bool {
        self.message == other.message
            && match (&self.source, &other.source) {
                (None, None) => true,
                (Some(a), Some(b)) => same_error(&**a, &**b),
                _ => false,
            }
    }
}

impl Eq for OtherProblem {}

/// Why an [`McpServer`](super::McpServer) could not be built: every tool whose entry is not a valid MCP tool, or
/// a configuration that cannot be used (the `requestState` key). [`source`](Error::source) is the first refused
/// entry, or else the error the configuration problem comes from (a random source that failed, the SDK's refusal
/// of a key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerError {
    pub(super) problems: Vec<InvalidToolEntry>,
    /// Problems that are not a tool's.
    pub(super) other: Vec<OtherProblem>,
}

impl McpServerError {
    /// The refused entries.
    pub fn problems(&self) -> &[InvalidToolEntry] {
        &self.problems
    }
}

impl fmt::Display for McpServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the MCP server could not be built:")?;
        for p in &self.problems {
            write!(f, "\n- {p}")?;
        }
        for p in &self.other {
            write!(f, "\n- {}", p.message)?;
        }
        Ok(())
    }
}

impl Error for McpServerError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self.problems.first() {
            Some(p) => Some(p),
            None => self.other.first().and_then(|p| p.source.as_deref()).map(|s| s as &(dyn Error + 'static)),
        }
    }
}

/// Why serving stopped with an error.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServeError {
    /// The session could not start (the client's `initialize` failed or the transport closed first).
    Initialize(Box<rmcp::service::ServerInitializeError>),
    /// The session's task ended abnormally.
    Session(tokio::task::JoinError),
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeError::Initialize(e) => write!(f, "the MCP session did not start: {e}"),
            ServeError::Session(e) => write!(f, "the MCP session ended abnormally: {e}"),
        }
    }
}

impl Error for ServeError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            ServeError::Initialize(e) => Some(&**e),
            ServeError::Session(e) => Some(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use keel_tools_core::{Executor, ToolView};

    use super::*;
    use crate::server::McpServer;

    #[test]
    fn a_refused_entry_keeps_the_parsers_error() {
        let json = serde_json::from_str::<rmcp::model::Tool>("{}").unwrap_err();
        let text = json.to_string();
        let entry = InvalidToolEntry { tool: "t".into(), source: Arc::new(json) };
        assert_eq!(entry.to_string(), format!("tool `t`: not a valid MCP tool entry: {text}"));
        assert!(entry.source().is_some_and(|s| s.is::<serde_json::Error>()));
        let e = McpServerError { problems: vec![entry.clone()], other: Vec::new() };
        let first = e.source().and_then(|s| s.downcast_ref::<InvalidToolEntry>()).expect("the first entry");
        assert_eq!(first, &entry);
        assert_eq!(e, e.clone());
        let other = serde_json::from_str::<rmcp::model::Tool>("[]").unwrap_err();
        assert_ne!(entry, InvalidToolEntry { tool: "t".into(), source: Arc::new(other) });
    }

    fn executor() -> Executor {
        Executor::new(ToolView::new(Vec::new())).unwrap()
    }

    #[test]
    fn a_key_the_sdk_refuses_keeps_the_sdks_error() {
        let e = McpServer::builder(executor()).request_state_key("", [7u8; 32]).build().unwrap_err();
        assert!(e.problems().is_empty());
        let sdk = e.source().and_then(|s| s.downcast_ref::<rmcp::model::RequestStateError>()).expect("rmcp's error");
        assert!(e.to_string().contains(&sdk.to_string()), "{e}");
        // Found by the builder itself: nothing to return.
        let e = McpServer::builder(executor()).request_state_key("k", [7u8; 8]).build().unwrap_err();
        assert!(e.to_string().contains("needs at least"), "{e}");
        assert!(e.source().is_none());
    }
}
