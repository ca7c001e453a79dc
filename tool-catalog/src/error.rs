//! Errors: [`RowError`] for one row that cannot become a tool (with a stable [`code`](RowError::code)), and
//! [`CatalogError`] for the catalogue itself (the SQLite file, the configuration) or a refused write.

use std::fmt;

use tool_core::Effect;

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
#[derive(Debug, Clone, PartialEq, Eq)]
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
        /// Why.
        reason: String,
    },
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
            | RowError::EndpointUnreachable { row, .. } => row,
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
            RowError::EndpointUnreachable { endpoint, reason, .. } => write!(
                f,
                "connecting to {endpoint:?} failed ({reason}); check that the MCP server is up: the row comes back \
                 in the next view once it answers"
            ),
        }
    }
}

impl std::error::Error for RowError {}

/// Why a catalogue operation failed: the SQLite file, the configuration, or a row refused on write.
///
/// | code | meaning | what to do |
/// |---|---|---|
/// | `busy` | another connection held the lock the operation needed for longer than the busy timeout ([`CatalogBuilder::busy_timeout`](crate::CatalogBuilder::busy_timeout), default 2 s); nothing was read or written | retry later (the operation can be repeated as it is), or raise the busy timeout |
/// | `store_error` | SQLite failed otherwise (opening, migrating, a full disk, a corrupt file) | read the message; the operation did not happen |
/// | `config_error` | the configuration is invalid | fix the builder's arguments |
/// | `serve_error` | building the executor or the MCP server over a view failed | read the message |
/// | a [`RowError`] code | a write was refused because the row would not resolve; nothing was written | fix the row |
#[derive(Debug, Clone, PartialEq, Eq)]
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
    },
    /// The store could not be reached (a PostgreSQL server down or the connection lost). Reads changed nothing; a
    /// write whose connection was lost while it committed may or may not have committed: read the row back (or
    /// compare change tokens) before repeating it.
    Unavailable {
        /// What was being done.
        context: String,
        /// The connection error.
        message: String,
    },
    /// Opening, migrating, reading or writing the store failed.
    Store {
        /// What was being done.
        context: String,
        /// The SQLite error.
        message: String,
    },
    /// The configuration is invalid (e.g. a module prefix that is not a Rust path).
    Config(String),
    /// A write was refused because the row would not resolve; nothing was written.
    Row(Box<RowError>),
    /// Building the executor or the MCP server over a view failed.
    Serve(String),
}

impl CatalogError {
    pub(crate) fn store(context: impl Into<String>, e: impl fmt::Display) -> CatalogError {
        CatalogError::Store { context: context.into(), message: e.to_string() }
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
            CatalogError::Config(_) => "config_error",
            CatalogError::Row(e) => e.code(),
            CatalogError::Serve(_) => "serve_error",
        }
    }
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CatalogError::Busy { context, waited, attempts } => write!(
                f,
                "busy: {context}: another connection held the catalogue's lock; gave up after {} ms and {attempts} \
                 attempt(s), nothing was changed; retry later, or raise the busy timeout",
                waited.as_millis()
            ),
            CatalogError::Store { context, message } => write!(f, "store_error: {context}: {message}"),
            CatalogError::Unavailable { context, message } => {
                write!(f, "store_unavailable: {context}: the store cannot be reached: {message}")
            }
            CatalogError::Config(m) => write!(f, "config_error: {m}"),
            CatalogError::Row(e) => write!(f, "row refused, nothing written: {e}"),
            CatalogError::Serve(m) => write!(f, "serve_error: {m}"),
        }
    }
}

impl std::error::Error for CatalogError {}

impl From<RowError> for CatalogError {
    fn from(e: RowError) -> CatalogError {
        CatalogError::Row(Box::new(e))
    }
}
