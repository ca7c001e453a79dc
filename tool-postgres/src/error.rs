//! What can go wrong: a connection string that cannot be used, a database that cannot be reached.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// Why a connector could not be made, or a connection opened. Its [`code`](PgError::code) is the one the stores
/// built on it report for the same cause.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum PgError {
    /// The connection string cannot be used: it does not parse, names an unknown `sslmode`, a mode that needs TLS
    /// in a build without it, or an `sslrootcert` that cannot be read.
    Config {
        /// What is wrong.
        message: String,
        /// The error that found it (`tokio_postgres::Error` for a connection string that does not parse, the I/O
        /// or PEM error of an `sslrootcert`); `None` when the connector found it.
        source: Option<Arc<dyn Error + Send + Sync + 'static>>,
    },
    /// The server could not be reached, refused the connection or its certificate, or did not answer in time.
    Unavailable {
        /// What was being done, and the database.
        context: String,
        /// The connection error: the driver's text and its causes, each once, with a hint when a certificate
        /// was refused.
        message: String,
        /// The driver's error; `None` when the server did not answer within the connect timeout.
        source: Option<Arc<dyn Error + Send + Sync + 'static>>,
    },
}

impl PgError {
    /// `config_error` found by the connector itself.
    pub(crate) fn config(message: impl Into<String>) -> PgError {
        PgError::Config { message: message.into(), source: None }
    }

    /// `config_error` or `store_unavailable`.
    pub fn code(&self) -> &'static str {
        match self {
            PgError::Config { .. } => "config_error",
            PgError::Unavailable { .. } => "store_unavailable",
        }
    }

    /// What went wrong, without the code and the context.
    pub fn message(&self) -> &str {
        match self {
            PgError::Config { message, .. } | PgError::Unavailable { message, .. } => message,
        }
    }
}

impl fmt::Display for PgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PgError::Config { message, .. } => write!(f, "config_error: {message}"),
            PgError::Unavailable { context, message, .. } => {
                write!(f, "store_unavailable: {context}: the store cannot be reached: {message}")
            }
        }
    }
}

impl Error for PgError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            PgError::Config { source, .. } | PgError::Unavailable { source, .. } => {
                source.as_deref().map(|s| s as &(dyn Error + 'static))
            }
        }
    }
}
