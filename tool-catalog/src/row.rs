//! [`ToolRow`]: one row of the `tools` table — a recipe for a callable, never the callable itself.

use keel_tools_core::definition::Effect;
use serde_json::{Map, Value, json};

use crate::error::RowRef;

/// The two kinds of recipe a catalogue resolves. Anything else stored in `kind` is refused (`kind_unknown`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The locator names a tool compiled into this binary.
    Local,
    /// The locator is an MCP endpoint; `extra.origin_name` is the tool's name there.
    Remote,
}

impl Kind {
    /// `"local"` or `"remote"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::Local => "local",
            Kind::Remote => "remote",
        }
    }

    /// The stored spelling, exactly (no case folding or trimming).
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "local" => Some(Kind::Local),
            "remote" => Some(Kind::Remote),
            _ => None,
        }
    }
}

/// One row of the `tools` table, as stored: plain data that is only *read* as a recipe.
///
/// Fields hold what the columns hold, so that a row with, say, an unknown kind or a misspelt effect can still be
/// represented and reported; [`Catalog::put`](crate::Catalog::put) refuses such a row and a view leaves it out
/// with a [`RowError`](crate::RowError). The constructors fill in consistent values.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRow {
    /// The name the model sees (keel's tool-name grammar, e.g. `incident.search`).
    pub name: String,
    /// The description the model reads.
    pub description: String,
    /// The argument schema (JSON Schema, an object schema). For a local row it may narrow the compiled tool's
    /// schema; for a remote row it is the only source of the argument shape.
    pub input_schema: Value,
    /// The result schema, if any. Local rows: empty, or equal to the compiled tool's. Remote rows: the tool's
    /// `outputSchema` (its results are then the remote's `structuredContent`); empty means content blocks.
    pub output_schema: Option<Value>,
    /// `local` or `remote`.
    pub kind: String,
    /// Local: a tool name or a Rust path (`my_app::status::get_service_status`). Remote: an MCP endpoint
    /// (`http://127.0.0.1:8931/mcp`, `stdio:<command line>`).
    pub locator: String,
    /// `MAJOR.MINOR[.PATCH]`: for a local row, the compiled contract it was written for.
    pub version: String,
    /// `read`, `write` or `destructive`.
    pub effect: String,
    /// Whether the row is listed and callable.
    pub enabled: bool,
    /// The tenant that sees the row; `None` for every tenant.
    pub tenant: Option<String>,
    /// A JSON object of further settings: `origin_name` (remote, required), `timeout_ms`, `idempotent`, `tags`.
    pub extra: Value,
}

impl ToolRow {
    /// A local row: `locator` is a compiled tool's name or its Rust path. Version `1.0`, effect `read`, enabled,
    /// every tenant.
    pub fn local(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        locator: impl Into<String>,
    ) -> ToolRow {
        ToolRow::new(name, description, input_schema, Kind::Local, locator, Effect::Read, Value::Object(Map::new()))
    }

    /// A remote row: `endpoint` is an MCP endpoint and `origin_name` the tool's name there (stored in
    /// `extra.origin_name`). Version `1.0`, effect `destructive` (set the real one with [`ToolRow::effect`]),
    /// enabled, every tenant.
    pub fn remote(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        endpoint: impl Into<String>,
        origin_name: impl Into<String>,
    ) -> ToolRow {
        let extra = json!({ "origin_name": origin_name.into() });
        ToolRow::new(name, description, input_schema, Kind::Remote, endpoint, Effect::Destructive, extra)
    }

    /// Version `1.0`, enabled, every tenant, no result schema.
    fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        kind: Kind,
        locator: impl Into<String>,
        effect: Effect,
        extra: Value,
    ) -> ToolRow {
        ToolRow {
            name: name.into(),
            description: description.into(),
            input_schema,
            output_schema: None,
            kind: kind.as_str().to_owned(),
            locator: locator.into(),
            version: "1.0".to_owned(),
            effect: effect.as_str().to_owned(),
            enabled: true,
            tenant: None,
            extra,
        }
    }

    /// Sets the version.
    pub fn version(mut self, version: impl Into<String>) -> ToolRow {
        self.version = version.into();
        self
    }
    /// Sets the effect.
    pub fn effect(mut self, effect: Effect) -> ToolRow {
        self.effect = effect.as_str().to_owned();
        self
    }
    /// Sets the result schema.
    pub fn output_schema(mut self, schema: Value) -> ToolRow {
        self.output_schema = Some(schema);
        self
    }
    /// Restricts the row to one tenant.
    pub fn tenant(mut self, tenant: impl Into<String>) -> ToolRow {
        self.tenant = Some(tenant.into());
        self
    }
    /// Enables or disables the row.
    pub fn enabled(mut self, enabled: bool) -> ToolRow {
        self.enabled = enabled;
        self
    }
    /// Sets one key of `extra`.
    pub fn extra(mut self, key: impl Into<String>, value: Value) -> ToolRow {
        if !self.extra.is_object() {
            self.extra = Value::Object(Map::new());
        }
        if let Value::Object(m) = &mut self.extra {
            m.insert(key.into(), value);
        }
        self
    }

    /// Pins a remote row's tool to `digest` (`extra.digest`; keel-tools-mcp's `client::pin::tool_digest` of the
    /// remote's entry, e.g. from `Pins::of`): the row resolves only while the server lists the tool with that
    /// digest, and a change announced later withholds it (`tool_changed`) until the row carries the new digest.
    pub fn pinned(self, digest: impl Into<String>) -> ToolRow {
        self.extra("digest", Value::String(digest.into()))
    }

    /// `extra.digest`, when it is a string.
    pub fn digest(&self) -> Option<&str> {
        self.extra.get("digest").and_then(Value::as_str)
    }

    /// `extra.origin_name`, when it is a string.
    pub fn origin_name(&self) -> Option<&str> {
        self.extra.get("origin_name").and_then(Value::as_str)
    }

    pub(crate) fn reference(&self, rowid: Option<i64>) -> RowRef {
        RowRef { rowid, name: self.name.clone(), tenant: self.tenant.clone() }
    }
}

/// A row read from the file: its `rowid` and the row, or why its columns could not be read.
#[derive(Debug, Clone)]
pub struct StoredRow {
    /// The SQLite `rowid`.
    pub rowid: i64,
    /// The row, or the `bad_row` error of a column that could not be read.
    pub row: Result<ToolRow, crate::error::RowError>,
}
