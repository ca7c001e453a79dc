//! What goes wrong connecting to a remote server ([`ConnectError`]) and importing its tools ([`ImportError`]).

use std::fmt;
use std::sync::Arc;

use keel_tools_core::results::{error_chain, same_error};

use crate::names::NameMappingError;

/// Why connecting to a remote server failed. [`source`](std::error::Error::source) is the error it comes from:
/// the SDK's `ClientInitializeError` (the handshake), `std::io::Error` (spawning the child), keel-tools-tls's
/// `TlsError` (a root certificate that is not PEM), `reqwest::Error` (building the HTTP client, or a request that
/// failed in the transport, such as a refused TLS certificate) or [`NameMappingError`] (a namespace that is not one
/// keel name segment). The text is the source's chain, each part once: reqwest's own text is often just "error
/// sending request".
#[derive(Debug, Clone)]
pub struct ConnectError {
    pub(super) source: Arc<dyn std::error::Error + Send + Sync + 'static>,
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "connecting to the MCP server failed: {}", error_chain(&*self.source))
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

impl ConnectError {
    pub(super) fn new(source: impl std::error::Error + Send + Sync + 'static) -> ConnectError {
        ConnectError { source: Arc::new(source) }
    }

    /// Whether the handshake failed on a response to `server/discover` that came after the probe gave up on it
    /// and sent `initialize` (a server slow to answer, not one that does not know the request).
    pub(crate) fn is_late_discover_answer(&self) -> bool {
        matches!(
            self.source.downcast_ref::<rmcp::service::ClientInitializeError>(),
            Some(
                rmcp::service::ClientInitializeError::ConflictInitResponseId(..)
                    | rmcp::service::ClientInitializeError::UncorrelatedErrorResponse { .. }
            )
        )
    }

    /// The server's `WWW-Authenticate` challenge, when it refused the connection with a `401` or `403` (an MCP server
    /// that is an OAuth protected resource; [`HttpConnect::login`](super::HttpConnect::login) answers it). Feature
    /// `http`.
    #[cfg(feature = "http")]
    pub fn auth_challenge(&self) -> Option<&str> {
        self.source.downcast_ref::<rmcp::service::ClientInitializeError>()?.auth_challenge()
    }
}

/// One reason a remote tool could not be imported. A problem that comes from another error returns it from
/// [`source`](std::error::Error::source). Two problems are equal when their fields are, errors compared by the text
/// of their chains.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ImportProblem {
    /// `tools/list` failed: the SDK's error (an [`rmcp::service::ServiceError`]).
    ListFailed(Arc<dyn std::error::Error + Send + Sync + 'static>),
    /// The remote name has no keel name.
    Unmappable(NameMappingError),
    /// Several remote names map to the same keel name.
    Collision {
        /// The keel name.
        name: String,
        /// The remote names, sorted.
        origins: Vec<String>,
    },
    /// The remote entry does not make a valid definition (e.g. its input schema is not an object schema).
    InvalidDefinition {
        /// The remote name.
        origin: String,
        /// What is wrong: the definition builder's error (a [`keel_tools_core::definition::DefinitionError`]).
        source: Arc<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// An [`Importer::effect`](super::Importer::effect) override names a tool the server does not list.
    UnknownOverride(String),
}

impl fmt::Display for ImportProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImportProblem::ListFailed(e) => write!(f, "tools/list failed: {e}"),
            ImportProblem::Unmappable(e) => e.fmt(f),
            ImportProblem::Collision { name, origins } => {
                write!(f, "MCP tools {} all map to `{name}`; import them under different servers", origins.join(", "))
            }
            ImportProblem::InvalidDefinition { origin, source } => write!(f, "MCP tool {origin:?}: {source}"),
            ImportProblem::UnknownOverride(o) => {
                write!(f, "effect override names {o:?}, which the server does not list")
            }
        }
    }
}

/// Why an import failed: every problem found, not only the first; [`source`](std::error::Error::source) is the
/// first of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportError {
    pub(super) namespace: String,
    pub(super) problems: Vec<ImportProblem>,
}

impl ImportError {
    /// The problems.
    pub fn problems(&self) -> &[ImportProblem] {
        &self.problems
    }
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "importing the tools of MCP server `{}` failed ({} problem(s))",
            self.namespace,
            self.problems.len()
        )?;
        for p in &self.problems {
            write!(f, "\n- {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ImportProblem {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ImportProblem::ListFailed(source) | ImportProblem::InvalidDefinition { source, .. } => Some(&**source),
            ImportProblem::Unmappable(e) => Some(e),
            ImportProblem::Collision { .. } | ImportProblem::UnknownOverride(_) => None,
        }
    }
}

impl PartialEq for ImportProblem {
    fn eq(&self, other: &ImportProblem) -> bool {
        use ImportProblem as P;
        match (self, other) {
            (P::ListFailed(a), P::ListFailed(b)) => same_error(&**a, &**b),
            (P::Unmappable(a), P::Unmappable(b)) => a == b,
            (P::Collision { name: n1, origins: o1 }, P::Collision { name: n2, origins: o2 }) => n1 == n2 && o1 == o2,
            (P::InvalidDefinition { origin: o1, source: s1 }, P::InvalidDefinition { origin: o2, source: s2 }) => {
                o1 == o2 && same_error(&**s1, &**s2)
            }
            (P::UnknownOverride(a), P::UnknownOverride(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for ImportProblem {}

impl std::error::Error for ImportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.problems.first().map(|p| p as &(dyn std::error::Error + 'static))
    }
}
