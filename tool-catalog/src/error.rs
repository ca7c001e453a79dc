//! Errors: [`RowError`] for one row that cannot become a tool (with a stable [`code`](RowError::code)), and
//! [`CatalogError`] for the catalogue itself (the SQLite file, the configuration) or a refused write.
//!
//! An error that comes from another one (the driver's, a JSON parser's, the MCP client's) keeps it as `source`,
//! returned by [`std::error::Error::source`]; it is shared (`Arc`) so the errors stay `Clone`. The text of each
//! error still says what the source said. Two errors are equal when their fields are, sources compared by the text
//! of their chains.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use keel_tools_core::definition::Effect;
use keel_tools_core::results::same_error;

/// Which row an error is about: its SQLite `rowid`, name and tenant, as far as the row could be read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RowRef {
    /// The row's SQLite `rowid` (`None` for a row not stored yet).
    pub rowid: Option<i64>,
    /// The `name` column (empty when it could not be read).
    pub name: String,
    /// The `tenant` column: `None` for a row every tenant sees.
    pub tenant: Option<String>,
}

impl fmt::Display for RowRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("catalogue row ")?;
        if let Some(id) = self.rowid {
            write!(f, "#{id} ")?;
        }
        write!(f, "{:?}", self.name)?;
        match &self.tenant {
            Some(t) => write!(f, " (tenant {t:?})"),
            None => f.write_str(" (every tenant)"),
        }
    }
}

/// Why one row could not be resolved into a tool. The row is left out of the view; nothing else changes.
///
/// | code | meaning | what to do |
/// |---|---|---|
/// | `bad_row` | a column holds data of the wrong shape (JSON, name, version, effect, description, schema) | fix the row; the write side let it through |
/// | `kind_unknown` | `kind` is neither `local` nor `remote` (e.g. code to evaluate) | code is never evaluated: run it out of process and add it as `remote` |
/// | `bad_locator` | the locator (or a remote row's `extra.origin_name`) does not parse | fix the row; the write side lacked validation |
/// | `module_not_allowed` | a local locator points outside the allowed module prefixes | point it at an allowed module, or allow the module in the configuration |
/// | `target_missing` | no compiled tool has that name or path | almost always drift: compare the deployed code version with the catalogue |
/// | `not_callable` | the path names a module that holds tools, not a tool fn | point it at one of the tool fns the module holds |
/// | `version_mismatch` | the row was written for a contract the compiled tool does not have | drift: compare the deployed code version with the catalogue |
/// | `effect_weakens` | a local row declares a weaker effect than the compiled tool | the row may only make the effect stricter |
/// | `schema_widens` | a local row's input schema accepts what the compiled handler's does not | narrow the row's schema (or copy the compiled one) |
/// | `endpoint_not_allowed` | a remote endpoint is not in the configured allowlist | use an allowed endpoint, or allow it in the configuration |
/// | `endpoint_unreachable` | connecting to a remote endpoint failed | check the MCP server; the row comes back once it answers |
/// | `tool_changed` | a remote row's tool is not what its `extra.digest` approved (the server changed or removed it) | review the change; approve it by writing the new digest into the row |
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum RowError {
    /// A column holds data of the wrong shape.
    BadRow {
        /// The row.
        row: RowRef,
        /// The column.
        column: &'static str,
        /// What is wrong.
        reason: String,
        /// The error that found it, when another component did: serde_json's for a column that is not JSON,
        /// keel-tools-core's [`NameError`](keel_tools_core::name::NameError), [`DefinitionError`](keel_tools_core::definition::DefinitionError)
        /// or [`ExecutorError`](keel_tools_core::executor::ExecutorError) for a name, definition or schema they refuse.
        source: Option<Arc<dyn Error + Send + Sync + 'static>>,
    },
    /// `kind` is neither `local` nor `remote`.
    KindUnknown {
        /// The row.
        row: RowRef,
        /// The stored kind.
        kind: String,
    },
    /// The locator (or a remote row's origin name) does not parse.
    BadLocator {
        /// The row.
        row: RowRef,
        /// The stored locator.
        locator: String,
        /// What is wrong.
        reason: String,
    },
    /// A local locator points outside the allowed module prefixes.
    ModuleNotAllowed {
        /// The row.
        row: RowRef,
        /// The module path that was refused.
        module: String,
        /// The allowed prefixes.
        allowed: Vec<String>,
    },
    /// No compiled tool has the locator's name or path.
    TargetMissing {
        /// The row.
        row: RowRef,
        /// The stored locator.
        locator: String,
    },
    /// The locator names a module, not a tool fn.
    NotCallable {
        /// The row.
        row: RowRef,
        /// The stored locator.
        locator: String,
        /// What the module holds: tool fns (`get_service_status`) and submodules (`status::`).
        holds: Vec<String>,
    },
    /// The row was written for a contract version the compiled tool does not have.
    VersionMismatch {
        /// The row.
        row: RowRef,
        /// The row's version.
        row_version: String,
        /// The compiled tool's version.
        compiled: String,
    },
    /// A local row declares a weaker effect than the compiled tool.
    EffectWeakens {
        /// The row.
        row: RowRef,
        /// The row's effect.
        row_effect: Effect,
        /// The compiled tool's effect.
        compiled: Effect,
    },
    /// A local row's input schema accepts values the compiled handler's schema does not (or the check cannot prove
    /// it does not).
    SchemaWidens {
        /// The row.
        row: RowRef,
        /// JSON pointer into the row's input schema.
        pointer: String,
        /// Why.
        reason: String,
    },
    /// A remote endpoint is not in the configured allowlist.
    EndpointNotAllowed {
        /// The row.
        row: RowRef,
        /// The endpoint.
        endpoint: String,
    },
    /// Connecting to a remote endpoint failed.
    EndpointUnreachable {
        /// The row.
        row: RowRef,
        /// The endpoint.
        endpoint: String,
        /// Why: the MCP client's [`ConnectError`](keel_tools_mcp::client::ConnectError), or a `std::io::Error` of kind
        /// [`TimedOut`](std::io::ErrorKind::TimedOut) when the endpoint did not answer within the connect timeout.
        source: Arc<dyn Error + Send + Sync + 'static>,
    },
    /// A remote row pins its tool (`extra.digest`) and the server lists it with another digest, or not at all: the
    /// row is withheld, and a forwarder made before the change refuses its calls (`tool_changed`), until the row
    /// carries the new digest.
    ToolChanged {
        /// The row.
        row: RowRef,
        /// The endpoint.
        endpoint: String,
        /// The tool's name there.
        origin: String,
        /// The approved and the current digest, and what differs.
        change: Box<ToolChange>,
    },
}

/// How a pinned remote tool differs from the digest its row approved ([`RowError::ToolChanged`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolChange {
    /// The digest the row approved.
    pub pinned: String,
    /// The digest the server lists now; `None` when it no longer lists the tool.
    pub current: Option<String>,
    /// What differs, one line per JSON pointer, when known.
    pub diff: Vec<String>,
}

impl RowError {
    /// The stable snake_case code (see the table on [`RowError`]).
    pub fn code(&self) -> &'static str {
        match self {
            RowError::BadRow { .. } => "bad_row",
            RowError::KindUnknown { .. } => "kind_unknown",
            RowError::BadLocator { .. } => "bad_locator",
            RowError::ModuleNotAllowed { .. } => "module_not_allowed",
            RowError::TargetMissing { .. } => "target_missing",
            RowError::NotCallable { .. } => "not_callable",
            RowError::VersionMismatch { .. } => "version_mismatch",
            RowError::EffectWeakens { .. } => "effect_weakens",
            RowError::SchemaWidens { .. } => "schema_widens",
            RowError::EndpointNotAllowed { .. } => "endpoint_not_allowed",
            RowError::EndpointUnreachable { .. } => "endpoint_unreachable",
            RowError::ToolChanged { .. } => "tool_changed",
        }
    }

    /// The row the error is about.
    pub fn row(&self) -> &RowRef {
        match self {
            RowError::BadRow { row, .. }
            | RowError::KindUnknown { row, .. }
            | RowError::BadLocator { row, .. }
            | RowError::ModuleNotAllowed { row, .. }
            | RowError::TargetMissing { row, .. }
            | RowError::NotCallable { row, .. }
            | RowError::VersionMismatch { row, .. }
            | RowError::EffectWeakens { row, .. }
            | RowError::SchemaWidens { row, .. }
            | RowError::EndpointNotAllowed { row, .. }
            | RowError::EndpointUnreachable { row, .. }
            | RowError::ToolChanged { row, .. } => row,
        }
    }
}

impl fmt::Display for RowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: ", self.code(), self.row())?;
        match self {
            RowError::BadRow { column, reason, .. } => {
                write!(f, "column `{column}`: {reason}; fix the row (the write side let it through)")
            }
            RowError::KindUnknown { kind, .. } => write!(
                f,
                "kind {kind:?} is neither \"local\" nor \"remote\"; a catalogue never evaluates code: run custom \
                 logic out of process behind an MCP server and add it as a \"remote\" row"
            ),
            RowError::BadLocator { locator, reason, .. } => {
                write!(f, "locator {locator:?}: {reason}; fix the row (the write side lacked validation)")
            }
            RowError::ModuleNotAllowed { module, allowed, .. } => {
                write!(f, "module `{module}` is outside the allowed module prefixes (")?;
                if allowed.is_empty() {
                    f.write_str("none configured")?;
                } else {
                    f.write_str(&allowed.join(", "))?;
                }
                f.write_str("); point the locator at an allowed module, or allow the module in the configuration")
            }
            RowError::TargetMissing { locator, .. } => write!(
                f,
                "no tool compiled into this binary is named or located at {locator:?}; this is almost always drift, \
                 not a dirty database: compare the deployed code version with the catalogue (a tool renamed or \
                 moved in code leaves its old locator behind)"
            ),
            RowError::NotCallable { locator, holds, .. } => {
                write!(f, "`{locator}` is a module, not a tool fn")?;
                if !holds.is_empty() {
                    write!(f, "; it holds {}", holds.join(", "))?;
                }
                write!(f, "; point the locator at one of its tool fns (`{locator}::<fn>`)")
            }
            RowError::VersionMismatch { row_version, compiled, .. } => write!(
                f,
                "the row was written for version {row_version} but the compiled tool is version {compiled}; \
                 compare the deployed code version with the catalogue, then update the row's version (and schema)"
            ),
            RowError::EffectWeakens { row_effect, compiled, .. } => write!(
                f,
                "the row declares effect \"{row_effect}\" but the compiled tool is \"{compiled}\"; a row may make \
                 the effect stricter, never weaker"
            ),
            RowError::SchemaWidens { pointer, reason, .. } => {
                let at = if pointer.is_empty() { "(root)" } else { pointer };
                write!(
                    f,
                    "the row's input_schema at {at} {reason}; a local row may narrow the compiled tool's argument \
                     schema but never widen it: tighten the row's schema, or copy the compiled one (`keel schema`)"
                )
            }
            RowError::EndpointNotAllowed { endpoint, .. } => write!(
                f,
                "endpoint {endpoint:?} is not in the configured allowlist; use an allowed endpoint, or allow it in \
                 the configuration"
            ),
            RowError::ToolChanged { endpoint, origin, change, .. } => {
                let pinned = &change.pinned;
                match &change.current {
                    None => write!(
                        f,
                        "the MCP server at {endpoint:?} no longer lists tool {origin:?}, which the row pins \
                         ({pinned}); the row is withheld: remove it, or point it at the tool's new name"
                    )?,
                    Some(current) => write!(
                        f,
                        "the MCP server at {endpoint:?} lists tool {origin:?} with digest {current}, not {pinned} as \
                         the row approved; the row is withheld until it carries the new digest (review the change \
                         first)"
                    )?,
                }
                if !change.diff.is_empty() {
                    write!(f, ": {}", change.diff.join("; "))?;
                }
                Ok(())
            }
            RowError::EndpointUnreachable { endpoint, source, .. } => write!(
                f,
                "connecting to {endpoint:?} failed ({source}); check that the MCP server is up: the row comes back \
                 in the next view once it answers"
            ),
        }
    }
}

impl Error for RowError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            RowError::BadRow { source, .. } => as_source(source),
            RowError::EndpointUnreachable { source, .. } => Some(&**source),
            _ => None,
        }
    }
}

impl PartialEq for RowError {
    fn eq(&self, other: &RowError) -> bool {
        use RowError as E;
        match (self, other) {
            (
                E::BadRow { row: r1, column: c1, reason: m1, source: s1 },
                E::BadRow { row: r2, column: c2, reason: m2, source: s2 },
            ) => r1 == r2 && c1 == c2 && m1 == m2 && same_optional_source(s1, s2),
            (E::KindUnknown { row: r1, kind: k1 }, E::KindUnknown { row: r2, kind: k2 }) => r1 == r2 && k1 == k2,
            (
                E::BadLocator { row: r1, locator: l1, reason: m1 },
                E::BadLocator { row: r2, locator: l2, reason: m2 },
            ) => r1 == r2 && l1 == l2 && m1 == m2,
            (
                E::ModuleNotAllowed { row: r1, module: m1, allowed: a1 },
                E::ModuleNotAllowed { row: r2, module: m2, allowed: a2 },
            ) => r1 == r2 && m1 == m2 && a1 == a2,
            (E::TargetMissing { row: r1, locator: l1 }, E::TargetMissing { row: r2, locator: l2 }) => {
                r1 == r2 && l1 == l2
            }
            (
                E::NotCallable { row: r1, locator: l1, holds: h1 },
                E::NotCallable { row: r2, locator: l2, holds: h2 },
            ) => r1 == r2 && l1 == l2 && h1 == h2,
            (
                E::VersionMismatch { row: r1, row_version: v1, compiled: c1 },
                E::VersionMismatch { row: r2, row_version: v2, compiled: c2 },
            ) => r1 == r2 && v1 == v2 && c1 == c2,
            (
                E::EffectWeakens { row: r1, row_effect: e1, compiled: c1 },
                E::EffectWeakens { row: r2, row_effect: e2, compiled: c2 },
            ) => r1 == r2 && e1 == e2 && c1 == c2,
            (
                E::SchemaWidens { row: r1, pointer: p1, reason: m1 },
                E::SchemaWidens { row: r2, pointer: p2, reason: m2 },
            ) => r1 == r2 && p1 == p2 && m1 == m2,
            (E::EndpointNotAllowed { row: r1, endpoint: e1 }, E::EndpointNotAllowed { row: r2, endpoint: e2 }) => {
                r1 == r2 && e1 == e2
            }
            (
                E::EndpointUnreachable { row: r1, endpoint: e1, source: s1 },
                E::EndpointUnreachable { row: r2, endpoint: e2, source: s2 },
            ) => r1 == r2 && e1 == e2 && same_error(&**s1, &**s2),
            (
                E::ToolChanged { row: r1, endpoint: e1, origin: o1, change: c1 },
                E::ToolChanged { row: r2, endpoint: e2, origin: o2, change: c2 },
            ) => r1 == r2 && e1 == e2 && o1 == o2 && c1 == c2,
            _ => false,
        }
    }
}

impl Eq for RowError {}

/// Why a catalogue operation failed: the SQLite file, the configuration, or a row refused on write.
///
/// | code | meaning | what to do |
/// |---|---|---|
/// | `busy` | another connection held the lock the operation needed for longer than the busy timeout ([`CatalogBuilder::busy_timeout`](crate::CatalogBuilder::busy_timeout), default 2 s); nothing was read or written | retry later (the operation can be repeated as it is), or raise the busy timeout |
/// | `store_error` | SQLite failed otherwise (opening, migrating, a full disk, a corrupt file) | read the message; the operation did not happen |
/// | `config_error` | the configuration is invalid | fix the builder's arguments |
/// | `serve_error` | building the executor or the MCP server over a view failed | read the message |
/// | a [`RowError`] code | a write was refused because the row would not resolve; nothing was written | fix the row |
///
/// The variants that come from another error (the driver's, a join of the blocking pool, the executor's or the MCP
/// server's) return it from [`source`](Error::source); a variant whose `source` is `None` was found by the
/// catalogue itself (a file from a newer build, a configuration it refuses).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum CatalogError {
    /// Another connection (this process or another) held the lock the operation needed for longer than the busy
    /// timeout. The operation changed nothing and may be repeated as it is.
    Busy {
        /// What was being done.
        context: String,
        /// How long the operation waited in all.
        waited: std::time::Duration,
        /// How many attempts found the lock held.
        attempts: u32,
        /// The driver's error of the last attempt (SQLite's `SQLITE_BUSY` or `SQLITE_LOCKED`, PostgreSQL's
        /// `lock_not_available`, a serialization failure or a deadlock).
        source: Option<Arc<dyn Error + Send + Sync + 'static>>,
    },
    /// The store could not be reached (a PostgreSQL server down or the connection lost). Reads changed nothing; a
    /// write whose connection was lost while it committed may or may not have committed: read the row back (or
    /// compare change tokens) before repeating it.
    Unavailable {
        /// What was being done.
        context: String,
        /// The connection error.
        message: String,
        /// The driver's error; `None` when the server did not answer within the connect timeout.
        source: Option<Arc<dyn Error + Send + Sync + 'static>>,
    },
    /// Opening, migrating, reading or writing the store failed.
    Store {
        /// What was being done.
        context: String,
        /// The store's error.
        message: String,
        /// The driver's error (`rusqlite::Error`, `tokio_postgres::Error`), or the runtime's `JoinError` of a
        /// SQLite attempt on the blocking pool; `None` when the catalogue refused the store itself (a schema from
        /// a newer build, a `tools` table that is not a catalogue).
        source: Option<Arc<dyn Error + Send + Sync + 'static>>,
    },
    /// The configuration is invalid (e.g. a module prefix that is not a Rust path).
    Config {
        /// What is wrong.
        message: String,
        /// The error that found it (`tokio_postgres::Error` for a connection string that does not parse); `None`
        /// when the catalogue found it.
        source: Option<Arc<dyn Error + Send + Sync + 'static>>,
    },
    /// A write was refused because the row would not resolve; nothing was written. The [`RowError`] is also the
    /// [`source`](Error::source).
    Row(Box<RowError>),
    /// Building the executor or the MCP server over a view failed: keel-tools-core's
    /// [`ExecutorError`](keel_tools_core::executor::ExecutorError) or keel-tools-mcp's
    /// [`McpServerError`](keel_tools_mcp::server::McpServerError).
    Serve(Arc<dyn Error + Send + Sync + 'static>),
}

impl CatalogError {
    /// `store_error` from the driver's (or the runtime's) error `e`.
    pub(crate) fn store(context: impl Into<String>, e: impl Error + Send + Sync + 'static) -> CatalogError {
        CatalogError::Store { context: context.into(), message: e.to_string(), source: Some(Arc::new(e)) }
    }

    /// `config_error` found by the catalogue itself.
    pub(crate) fn config(message: impl Into<String>) -> CatalogError {
        CatalogError::Config { message: message.into(), source: None }
    }

    /// Whether the error is `busy`: the same operation may succeed when repeated later.
    pub fn is_busy(&self) -> bool {
        matches!(self, CatalogError::Busy { .. })
    }

    /// `busy`, `store_error`, `store_unavailable`, `config_error`, `serve_error`, or the refused row's code.
    pub fn code(&self) -> &'static str {
        match self {
            CatalogError::Busy { .. } => "busy",
            CatalogError::Store { .. } => "store_error",
            CatalogError::Unavailable { .. } => "store_unavailable",
            CatalogError::Config { .. } => "config_error",
            CatalogError::Row(e) => e.code(),
            CatalogError::Serve(_) => "serve_error",
        }
    }
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CatalogError::Busy { context, waited, attempts, .. } => write!(
                f,
                "busy: {context}: another connection held the catalogue's lock; gave up after {} ms and {attempts} \
                 attempt(s), nothing was changed; retry later, or raise the busy timeout",
                waited.as_millis()
            ),
            CatalogError::Store { context, message, .. } => write!(f, "store_error: {context}: {message}"),
            CatalogError::Unavailable { context, message, .. } => {
                write!(f, "store_unavailable: {context}: the store cannot be reached: {message}")
            }
            CatalogError::Config { message, .. } => write!(f, "config_error: {message}"),
            CatalogError::Row(e) => write!(f, "row refused, nothing written: {e}"),
            CatalogError::Serve(e) => write!(f, "serve_error: {e}"),
        }
    }
}

impl Error for CatalogError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            CatalogError::Busy { source, .. }
            | CatalogError::Unavailable { source, .. }
            | CatalogError::Store { source, .. }
            | CatalogError::Config { source, .. } => as_source(source),
            CatalogError::Row(e) => Some(&**e),
            CatalogError::Serve(e) => Some(&**e),
        }
    }
}

/// A connection string the connector could not use (`config_error`), or a database it could not reach
/// (`store_unavailable`): the same code, message and source.
#[cfg(feature = "postgres")]
impl From<keel_tools_postgres::PgError> for CatalogError {
    fn from(e: keel_tools_postgres::PgError) -> CatalogError {
        match e {
            keel_tools_postgres::PgError::Config { message, source } => CatalogError::Config { message, source },
            keel_tools_postgres::PgError::Unavailable { context, message, source } => {
                CatalogError::Unavailable { context, message, source }
            }
            // A kind this build does not know (the enum is non-exhaustive): its text, as a store error.
            other => CatalogError::Store {
                context: "connecting to PostgreSQL".to_owned(),
                message: other.message().to_owned(),
                source: Some(Arc::new(other)),
            },
        }
    }
}

impl PartialEq for CatalogError {
    fn eq(&self, other: &CatalogError) -> bool {
        use CatalogError as E;
        match (self, other) {
            (
                E::Busy { context: c1, waited: w1, attempts: a1, source: s1 },
                E::Busy { context: c2, waited: w2, attempts: a2, source: s2 },
            ) => c1 == c2 && w1 == w2 && a1 == a2 && same_optional_source(s1, s2),
            (
                E::Unavailable { context: c1, message: m1, source: s1 },
                E::Unavailable { context: c2, message: m2, source: s2 },
            )
            | (E::Store { context: c1, message: m1, source: s1 }, E::Store { context: c2, message: m2, source: s2 }) => {
                c1 == c2 && m1 == m2 && same_optional_source(s1, s2)
            }
            (E::Config { message: m1, source: s1 }, E::Config { message: m2, source: s2 }) => {
                m1 == m2 && same_optional_source(s1, s2)
            }
            (E::Row(a), E::Row(b)) => a == b,
            (E::Serve(a), E::Serve(b)) => same_error(&**a, &**b),
            _ => false,
        }
    }
}

impl Eq for CatalogError {}

fn as_source<'a>(source: &'a Option<Arc<dyn Error + Send + Sync + 'static>>) -> Option<&'a (dyn Error + 'static)> {
    source.as_deref().map(|s| s as &(dyn Error + 'static))
}

fn same_optional_source(
    a: &Option<Arc<dyn Error + Send + Sync + 'static>>,
    b: &Option<Arc<dyn Error + Send + Sync + 'static>>,
) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => same_error(&**a, &**b),
        _ => false,
    }
}

impl From<RowError> for CatalogError {
    fn from(e: RowError) -> CatalogError {
        CatalogError::Row(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> RowRef {
        RowRef { rowid: Some(1), name: "t".into(), tenant: None }
    }

    fn json_error(text: &str) -> serde_json::Error {
        serde_json::from_str::<serde_json::Value>(text).unwrap_err()
    }

    fn bad_row(source: Option<Arc<dyn Error + Send + Sync>>) -> RowError {
        RowError::BadRow { row: row(), column: "extra", reason: "is not valid JSON".into(), source }
    }

    #[test]
    fn row_errors_return_their_source() {
        let e = bad_row(Some(Arc::new(json_error("{"))));
        assert!(e.source().is_some_and(|s| s.is::<serde_json::Error>()));
        assert!(bad_row(None).source().is_none());
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = RowError::EndpointUnreachable { row: row(), endpoint: "stdio:x".into(), source: Arc::new(io) };
        assert_eq!(
            e.to_string(),
            "endpoint_unreachable: catalogue row #1 \"t\" (every tenant): connecting to \"stdio:x\" failed (no such \
             file); check that the MCP server is up: the row comes back in the next view once it answers"
        );
        let io = e.source().and_then(|s| s.downcast_ref::<std::io::Error>()).expect("the io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
        assert!(RowError::TargetMissing { row: row(), locator: "a::b".into() }.source().is_none());
    }

    #[test]
    fn catalog_errors_return_their_source() {
        let e = CatalogError::store("opening x", std::io::Error::other("disk full"));
        assert_eq!(e.to_string(), "store_error: opening x: disk full");
        assert!(e.source().is_some_and(|s| s.is::<std::io::Error>()));
        let e = CatalogError::Serve(Arc::new(std::io::Error::other("no executor")));
        assert_eq!(e.to_string(), "serve_error: no executor");
        assert!(e.source().is_some_and(|s| s.is::<std::io::Error>()));
        let refused = bad_row(Some(Arc::new(json_error("{"))));
        let e = CatalogError::from(refused.clone());
        let row = e.source().and_then(|s| s.downcast_ref::<RowError>()).expect("the RowError");
        assert_eq!(row, &refused);
        assert!(row.source().is_some_and(|s| s.is::<serde_json::Error>()));
        assert!(CatalogError::config("x").source().is_none());
    }

    #[test]
    fn equality_compares_fields_and_the_text_of_sources() {
        let a = bad_row(Some(Arc::new(json_error("{"))));
        assert_eq!(a, a.clone());
        assert_eq!(a, bad_row(Some(Arc::new(json_error("{")))));
        assert_ne!(a, bad_row(Some(Arc::new(json_error("[")))));
        assert_ne!(a, bad_row(None));
        let store = |m: &str| CatalogError::store("c", std::io::Error::other(m.to_owned()));
        assert_eq!(store("m"), store("m"));
        assert_ne!(store("m"), store("n"));
        assert_eq!(CatalogError::from(a.clone()), CatalogError::from(a));
        assert_ne!(CatalogError::config("m"), store("m"));
    }
}
