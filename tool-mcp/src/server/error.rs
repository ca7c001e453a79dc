//! Why a server could not be built, or stopped serving.

use std::fmt;

/// One tool whose `tools/list` entry is not a valid MCP tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidToolEntry {
    /// The tool.
    pub tool: String,
    /// Why the SDK refused the entry.
    pub reason: String,
}

impl fmt::Display for InvalidToolEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tool `{}`: not a valid MCP tool entry: {}", self.tool, self.reason)
    }
}

/// Why an [`McpServer`](super::McpServer) could not be built: every tool whose entry is not a valid MCP tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerError {
    pub(super) problems: Vec<InvalidToolEntry>,
    /// Problems that are not a tool's.
    pub(super) other: Vec<String>,
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
            write!(f, "\n- {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for McpServerError {}

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

impl std::error::Error for ServeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServeError::Initialize(e) => Some(&**e),
            ServeError::Session(e) => Some(e),
        }
    }
}
