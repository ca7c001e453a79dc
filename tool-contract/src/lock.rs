//! The schema lock: a committed file that pins each tool's name, version and schemas, so that a contract change
//! without a version bump fails CI instead of surprising a caller.
//!
//! A lock ([`Lock`]) lists every tool of a registry, sorted by name: its name, its version, and for its argument
//! and result schemas a fingerprint plus a structural summary. [`check`] compares a registry with a lock's text
//! and says, tool by tool, what changed and whether the version moved far enough:
//!
//! ```
//! use serde_json::json;
//! use keel_tools_contract::lock;
//! use keel_tools_core::{Registry, ToolError};
//! use keel_tools_core::definition::ToolDefinition;
//!
//! fn search(version: &'static str, schema: serde_json::Value) -> ToolDefinition {
//!     ToolDefinition::builder("incident.search")
//!         .description("Searches incidents.")
//!         .version(version)
//!         .input_schema(schema)
//!         .handler(|_args, _ctx| async { Ok::<_, ToolError>(json!([])) })
//!         .build()
//!         .unwrap()
//! }
//! let v1 = json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]});
//! let registry = Registry::builder().without_inventory().tool(search("1.0", v1)).build().unwrap();
//! let lock_text = lock::Lock::of_registry(&registry).to_json();
//!
//! // `query` renamed to `text`: a breaking change, so 1.0 must become 2.0.
//! let v2 = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
//! let same_version = Registry::builder().without_inventory().tool(search("1.0", v2.clone())).build().unwrap();
//! let report = lock::check(&same_version, &lock_text).unwrap();
//! assert!(!report.is_ok());
//! assert!(report.to_string().contains("argument `query` was removed"));
//!
//! let bumped = Registry::builder().without_inventory().tool(search("2.0", v2)).build().unwrap();
//! let report = lock::check(&bumped, &lock_text).unwrap();
//! assert!(report.is_ok());       // the version rule holds...
//! assert!(!report.is_current()); // ...but the lock still records 1.0: run `keel lock` and commit it
//! ```
//!
//! # The rule
//!
//! Versions are `MAJOR.MINOR[.PATCH]` (a missing patch is 0). When a tool's schemas differ from the lock, the
//! change is classified by its most severe part, and the version must have grown at least this much since the
//! locked version:
//!
//! | change | examples | required bump |
//! |---|---|---|
//! | **breaking** | an argument removed or renamed; a new *required* argument; an optional argument made required; an argument's type narrowed (`integer \| string` to `string`, `number` to `integer`); enum values removed; a constraint added or tightened (`maxLength` 100 to 50, a new `pattern`); a result field removed, made optional, or widened (it may now be `null`, or a new enum value) | major (`1.4` to `2.0`) |
//! | **additive** | a new *optional* argument; a required argument made optional; a type widened; enum values added; a constraint removed or loosened; a new result field | minor (`1.4` to `1.5`) |
//! | **other** | descriptions, titles, defaults, examples: the fingerprint changed but the structure did not | patch (`1.4` to `1.4.1`) |
//!
//! Arguments are what callers send, so *narrowing* what is accepted breaks them; results are what callers read, so
//! *widening* what may be produced breaks them. For `0.y` versions the rule shifts one place, as in Cargo: a
//! breaking change needs a minor bump (`0.3` to `0.4`) and an additive one a patch bump. A description change
//! counts because the model reads it: it changes what the model does.
//!
//! [`check`] also fails when a tool is in the registry but not in the lock (it appeared), when a tool is in the
//! lock but not in the registry (it vanished: removing a tool breaks every caller), and when a version went
//! backwards. A tool whose schemas changed *with* a sufficient bump passes, reported as out of date
//! ([`LockReport::is_current`] is false) until the lock is regenerated; `keel lock --check --strict` fails on
//! that too.
//!
//! # The file
//!
//! JSON, written by [`Lock::to_json`]: deterministic (tools sorted by name, fields sorted by path, keys in a fixed
//! order), so regenerating an unchanged lock changes no byte. The fingerprint is `fnv1a128:` followed by the 128-bit
//! FNV-1a hash (written out in this module, no dependency) of the schema's [`canonical_json`] (without the top-level
//! `$schema`), in 32 lowercase hex digits. It detects accidental changes; it is not a cryptographic hash. The summary
//! maps each field path (`incident_id`, `evidence[]`, `address.zip`, `labels.*`; the empty path is the top level) to
//! whether it is required, its JSON types, its enum values and its constraints, which is what the classification above
//! reads.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use keel_tools_core::Registry;
use keel_tools_core::definition::ToolDefinition;
use keel_tools_core::name::parse_version;
use keel_tools_schema::canonical::canonical_json;

mod classify;
mod summary;

pub use classify::{Change, ChangeLevel, bump_satisfies, compare, required_version};
pub use summary::summarize;

/// The format number written in every lock file (`"keel_lock": 1`).
pub const FORMAT: u32 = 1;

/// The conventional file name of the lock, at the root of the repository.
pub const DEFAULT_PATH: &str = "keel.lock";

/// How many schema nodes one summary may visit; guards against references that expand exponentially.
const NODE_BUDGET: usize = 100_000;

/// A lock: every tool's name, version and schema summaries, sorted by name, and the pinned tools of each remote MCP
/// server that is forwarded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lock {
    /// The file format ([`FORMAT`]).
    pub keel_lock: u32,
    /// One entry per tool, sorted by name.
    pub tools: Vec<LockEntry>,
    /// The pinned tools of each forwarded MCP server, by namespace (`keel lock --forward NAME=...`); absent from
    /// the file when there is none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub remote: BTreeMap<String, RemoteLock>,
}

/// The pinned tools of one remote MCP server: how to reach it, and the digest of each tool as it was approved
/// (keel-tools-mcp's `client::pin`). A tool whose digest differs is withheld by a pinned forwarder, and fails
/// `keel lock --check`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteLock {
    /// How the server is reached: a Streamable HTTP URL, or a command line (program and arguments) for stdio.
    pub connect: RemoteConnect,
    /// The server's identity the digests cover (its URL, or its command line).
    pub server: String,
    /// One pin per tool, by the tool's MCP name.
    pub tools: BTreeMap<String, RemotePin>,
}

/// How a remote MCP server is reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RemoteConnect {
    /// A Streamable HTTP endpoint, `http://` or `https://`.
    Url(String),
    /// A program and its arguments, spoken to over stdio.
    Command(Vec<String>),
}

/// One pinned remote tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemotePin {
    /// `sha256:` and 64 hex digits, over the tool's entry and the server's identity.
    pub digest: String,
    /// The `tools/list` entry the digest covers, to show what changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<Value>,
}

/// One tool in the lock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockEntry {
    /// The tool name.
    pub name: String,
    /// The tool version when the lock was written.
    pub version: String,
    /// The argument schema.
    pub input: SchemaLock,
    /// The result schema; `null` when the tool declares none.
    pub output: Option<SchemaLock>,
}

/// One schema in the lock: its fingerprint and its structural summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchemaLock {
    /// `fnv1a128:<32 hex digits>` of the schema's canonical JSON.
    pub fingerprint: String,
    /// Field path (`""` for the top level) to its summary.
    pub fields: BTreeMap<String, FieldSummary>,
}

/// What the lock remembers about one field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldSummary {
    /// Whether the field must be present (inside its parent, when the parent is present).
    pub required: bool,
    /// The JSON types it may have, sorted; empty means any value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub types: Vec<String>,
    /// The values it is restricted to (`enum`/`const`), sorted by canonical JSON; absent when unrestricted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<Value>>,
    /// Constraint keywords (`maxLength`, `pattern`, `minimum`, ...) and their values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub constraints: BTreeMap<String, Value>,
    /// The definition this field repeats, for a recursive type (the summary stops there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursive: Option<String>,
}

/// Why a lock's text could not be read. When the text is not JSON, the parser's error is the
/// [`source`](std::error::Error::source). Two errors are equal when their messages are.
#[derive(Debug, Clone)]
pub struct LockError {
    message: String,
    source: Option<Arc<serde_json::Error>>,
}

impl PartialEq for LockError {
    fn eq(&self, other: &LockError) -> bool {
        self.message == other.message
    }
}

impl Eq for LockError {}

impl LockError {
    fn new(message: impl Into<String>) -> LockError {
        LockError { message: message.into(), source: None }
    }
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the lock cannot be read: {}", self.message)
    }
}

impl std::error::Error for LockError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl Lock {
    /// The lock of these definitions (sorted by name; a repeated name keeps its first definition).
    pub fn of<'a>(defs: impl IntoIterator<Item = &'a ToolDefinition>) -> Lock {
        let mut tools: Vec<LockEntry> = defs.into_iter().map(LockEntry::of).collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools.dedup_by(|a, b| a.name == b.name);
        Lock { keel_lock: FORMAT, tools, remote: BTreeMap::new() }
    }

    /// The lock of every tool in `registry`.
    pub fn of_registry(registry: &Registry) -> Lock {
        Lock::of(registry.iter().map(|d| &**d))
    }

    /// Reads a lock file's text.
    pub fn parse(text: &str) -> Result<Lock, LockError> {
        let lock: Lock = serde_json::from_str(text).map_err(|e| LockError {
            message: format!("it is not a keel lock (line {}, column {}): {e}", e.line(), e.column()),
            source: Some(Arc::new(e)),
        })?;
        if lock.keel_lock != FORMAT {
            return Err(LockError::new(format!(
                "it has format {}, and this keel reads format {FORMAT}; regenerate it with `keel lock`",
                lock.keel_lock
            )));
        }
        let mut seen = BTreeSet::new();
        for t in &lock.tools {
            if !seen.insert(t.name.as_str()) {
                return Err(LockError::new(format!("tool `{}` appears twice", t.name)));
            }
            if parse_version(&t.version).is_none() {
                return Err(LockError::new(format!("tool `{}` has an invalid version {:?}", t.name, t.version)));
            }
        }
        Ok(lock)
    }

    /// The file text: pretty JSON with a trailing newline, byte-for-byte the same for the same tools.
    pub fn to_json(&self) -> String {
        let mut tools = self.tools.clone();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        let lock = Lock { keel_lock: self.keel_lock, tools, remote: self.remote.clone() };
        // Structs serialize in field order and maps are `BTreeMap`s; values were normalised when summarised.
        let mut text = inline_scalar_arrays(&serde_json::to_string_pretty(&lock).unwrap_or_default());
        text.push('\n');
        text
    }

    /// The entry of tool `name`.
    pub fn get(&self, name: &str) -> Option<&LockEntry> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// Puts arrays of scalars on one line (`"types": ["boolean", "null"]`) in `serde_json`'s pretty output, which
/// writes one element per line.
fn inline_scalar_arrays(pretty: &str) -> String {
    let lines: Vec<&str> = pretty.lines().collect();
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.ends_with('[') {
            // A string element ends with `"` or `",`, so only an opening bracket ends a line with `[`.
            let indent = line.len() - line.trim_start().len();
            let close = lines[i + 1..].iter().position(|l| {
                let t = l.trim_start();
                l.len() - t.len() == indent && (t == "]" || t == "],")
            });
            if let Some(offset) = close {
                let items = &lines[i + 1..i + 1 + offset];
                let scalar = |l: &&str| {
                    let t = l.trim_start();
                    l.len() - t.len() == indent + 2
                        && t.starts_with(|c: char| c == '"' || c == '-' || c.is_ascii_digit() || "tfn".contains(c))
                        && !t.ends_with('{')
                        && !t.ends_with('[')
                };
                if items.iter().all(scalar) {
                    let joined: Vec<&str> = items.iter().map(|l| l.trim().trim_end_matches(',')).collect();
                    let end = lines[i + 1 + offset].trim_start();
                    out.push(format!("{line}{}{}", joined.join(", "), end));
                    i += offset + 2;
                    continue;
                }
            }
        }
        out.push(line.to_owned());
        i += 1;
    }
    out.join("\n")
}

impl LockEntry {
    /// The entry of one definition.
    pub fn of(def: &ToolDefinition) -> LockEntry {
        LockEntry {
            name: def.name().to_owned(),
            version: def.version().to_owned(),
            input: SchemaLock::of(def.input_schema()),
            output: def.output_schema().map(SchemaLock::of),
        }
    }
}

impl SchemaLock {
    /// The fingerprint and summary of one schema.
    pub fn of(schema: &Value) -> SchemaLock {
        SchemaLock { fingerprint: fingerprint(schema), fields: summarize(schema) }
    }
}

/// `fnv1a128:` and the 128-bit FNV-1a hash of the schema's canonical JSON, in 32 lowercase hex digits. The
/// top-level `$schema` (the dialect's URI, which says nothing about the contract) is left out.
pub fn fingerprint(schema: &Value) -> String {
    let text = match schema {
        Value::Object(map) if map.contains_key("$schema") => {
            let mut map = map.clone();
            map.remove("$schema");
            canonical_json(&Value::Object(map))
        }
        other => canonical_json(other),
    };
    format!("fnv1a128:{:032x}", fnv1a_128(text.as_bytes()))
}

/// 128-bit FNV-1a (offset basis `0x6c62272e07bb014262b821756295c58d`, prime `2^88 + 2^8 + 0x3b`).
fn fnv1a_128(bytes: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let mut h = OFFSET;
    for &b in bytes {
        h ^= u128::from(b);
        h = h.wrapping_mul(PRIME);
    }
    h
}

// ---------------------------------------------------------------------------------------------------------------
// The check
// ---------------------------------------------------------------------------------------------------------------

/// What [`check`] found for one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolStatus {
    /// Same schemas, same version.
    Unchanged,
    /// The schemas changed and the version moved far enough; the lock is out of date.
    Bumped {
        /// The locked version.
        from: String,
        /// The current version.
        to: String,
        /// The most severe change.
        level: ChangeLevel,
        /// What changed.
        changes: Vec<Change>,
    },
    /// Only the version changed (upwards); the lock is out of date.
    VersionOnly {
        /// The locked version.
        from: String,
        /// The current version.
        to: String,
    },
    /// Error: the schemas changed but the version did not move far enough.
    NeedsBump {
        /// The locked version.
        from: String,
        /// The current version.
        to: String,
        /// The most severe change.
        level: ChangeLevel,
        /// The smallest version that would do.
        required: String,
        /// What changed.
        changes: Vec<Change>,
    },
    /// Error: the version is lower than the locked one.
    VersionDecreased {
        /// The locked version.
        from: String,
        /// The current version.
        to: String,
    },
    /// Error: the tool is not in the lock.
    Added {
        /// Its version.
        version: String,
    },
    /// Error: the tool is in the lock but no longer exists.
    Removed {
        /// The locked version.
        version: String,
    },
}

impl ToolStatus {
    /// Whether this fails the check.
    pub fn is_error(&self) -> bool {
        matches!(
            self,
            ToolStatus::NeedsBump { .. }
                | ToolStatus::VersionDecreased { .. }
                | ToolStatus::Added { .. }
                | ToolStatus::Removed { .. }
        )
    }
}

/// One tool's line in a [`LockReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolReport {
    /// The tool name.
    pub name: String,
    /// What was found.
    #[serde(flatten)]
    pub status: ToolStatus,
}

/// The result of [`check`]: one line per tool of the registry or the lock, sorted by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockReport {
    /// Every tool, sorted by name.
    pub tools: Vec<ToolReport>,
}

impl LockReport {
    /// Whether the version rule holds for every tool and no tool appeared or vanished.
    pub fn is_ok(&self) -> bool {
        !self.tools.iter().any(|t| t.status.is_error())
    }
    /// Whether the lock records exactly the current tools (nothing to regenerate).
    pub fn is_current(&self) -> bool {
        self.tools.iter().all(|t| t.status == ToolStatus::Unchanged)
    }
    /// The tools that fail the check.
    pub fn errors(&self) -> impl Iterator<Item = &ToolReport> {
        self.tools.iter().filter(|t| t.status.is_error())
    }
    /// The tools that pass but whose lock entry is out of date.
    pub fn outdated(&self) -> impl Iterator<Item = &ToolReport> {
        self.tools.iter().filter(|t| !t.status.is_error() && t.status != ToolStatus::Unchanged)
    }
}

fn write_changes(f: &mut fmt::Formatter<'_>, changes: &[Change]) -> fmt::Result {
    for c in changes {
        write!(f, "\n    - {}: {}", c.level, c.message)?;
    }
    Ok(())
}

impl fmt::Display for ToolReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = &self.name;
        match &self.status {
            ToolStatus::Unchanged => write!(f, "ok: `{name}` is unchanged"),
            ToolStatus::VersionOnly { from, to } => {
                write!(f, "outdated: `{name}` {from} -> {to} with unchanged schemas; run `keel lock` to record it")
            }
            ToolStatus::Bumped { from, to, level, changes } => {
                write!(
                    f,
                    "outdated: `{name}` {from} -> {to}: {level} change with a sufficient bump; run `keel lock` \
                     to record it:"
                )?;
                write_changes(f, changes)
            }
            ToolStatus::NeedsBump { from, to, level, required, changes } => {
                let rule = match level {
                    ChangeLevel::Breaking => "a breaking change needs a major bump",
                    ChangeLevel::Additive => "an additive change needs a minor bump",
                    ChangeLevel::Other => "any schema change needs at least a patch bump",
                };
                let now = if from == to { format!("is still {to}") } else { format!("went only from {from} to {to}") };
                let how = match level {
                    ChangeLevel::Breaking => "in a breaking way",
                    ChangeLevel::Additive => "additively",
                    ChangeLevel::Other => "in descriptions or annotations only",
                };
                write!(
                    f,
                    "error: `{name}`: its schemas changed {how}, but its version {now}; bump it to {required} or \
                     later ({rule}):"
                )?;
                write_changes(f, changes)
            }
            ToolStatus::VersionDecreased { from, to } => {
                write!(f, "error: `{name}`: its version went back from {from} to {to}")
            }
            ToolStatus::Added { version } => {
                write!(f, "error: `{name}` {version} is not in the lock; run `keel lock` and commit the lock")
            }
            ToolStatus::Removed { version } => write!(
                f,
                "error: `{name}` {version} is in the lock but no longer exists; removing a tool breaks its callers. \
                 If that is intended, run `keel lock` and commit the lock"
            ),
        }
    }
}

impl fmt::Display for LockReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let errors = self.errors().count();
        let outdated = self.outdated().count();
        write!(f, "schema lock: {} tool(s), {errors} error(s), {outdated} out of date", self.tools.len())?;
        for t in self.errors().chain(self.outdated()) {
            write!(f, "\n{t}")?;
        }
        Ok(())
    }
}

/// Compares the tools of `registry` with a lock's text.
pub fn check(registry: &Registry, lock_text: &str) -> Result<LockReport, LockError> {
    check_definitions(registry.iter().map(|d| &**d), lock_text)
}

/// Compares these definitions with a lock's text.
pub fn check_definitions<'a>(
    defs: impl IntoIterator<Item = &'a ToolDefinition>,
    lock_text: &str,
) -> Result<LockReport, LockError> {
    let locked = Lock::parse(lock_text)?;
    Ok(check_lock(&Lock::of(defs), &locked))
}

/// Compares a current lock (from [`Lock::of`]) with a locked one.
pub fn check_lock(current: &Lock, locked: &Lock) -> LockReport {
    let old: BTreeMap<&str, &LockEntry> = locked.tools.iter().map(|t| (t.name.as_str(), t)).collect();
    let new: BTreeMap<&str, &LockEntry> = current.tools.iter().map(|t| (t.name.as_str(), t)).collect();
    let names: BTreeSet<&str> = old.keys().chain(new.keys()).copied().collect();
    let tools = names
        .into_iter()
        .map(|name| {
            let status = match (old.get(name), new.get(name)) {
                (Some(o), Some(n)) => status(o, n),
                (Some(o), None) => ToolStatus::Removed { version: o.version.clone() },
                (None, Some(n)) => ToolStatus::Added { version: n.version.clone() },
                (None, None) => ToolStatus::Unchanged,
            };
            ToolReport { name: name.to_owned(), status }
        })
        .collect();
    LockReport { tools }
}

fn status(old: &LockEntry, new: &LockEntry) -> ToolStatus {
    let (from, to) = (old.version.clone(), new.version.clone());
    let same_schemas = old.input.fingerprint == new.input.fingerprint
        && old.output.as_ref().map(|s| &s.fingerprint) == new.output.as_ref().map(|s| &s.fingerprint);
    let (ov, nv) = (parse_version(&from), parse_version(&to));
    if ov.is_some() && nv.is_some() && nv < ov {
        return ToolStatus::VersionDecreased { from, to };
    }
    if same_schemas {
        return if ov == nv { ToolStatus::Unchanged } else { ToolStatus::VersionOnly { from, to } };
    }
    let changes = compare(old, new);
    let level = changes.iter().map(|c| c.level).max().unwrap_or(ChangeLevel::Other);
    if bump_satisfies(&from, &to, level) {
        ToolStatus::Bumped { from, to, level, changes }
    } else {
        let required = required_version(&from, level).unwrap_or_else(|| "a higher version".to_owned());
        ToolStatus::NeedsBump { from, to, level, required, changes }
    }
}

/// For a test: panics with the report when `registry` breaks the rule against the lock's text.
///
/// ```no_run
/// #[test]
/// fn schema_lock() {
///     let registry = keel_tools_core::Registry::from_inventory().unwrap();
///     let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/keel.lock")).unwrap();
///     keel_tools_contract::lock::assert_lock(&registry, &lock);
/// }
/// ```
#[track_caller]
pub fn assert_lock(registry: &Registry, lock_text: &str) {
    match check(registry, lock_text) {
        Ok(report) if report.is_ok() => {}
        Ok(report) => panic!("{report}"),
        Err(e) => panic!("{e}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::classify::{Side, compare_schemas};
    use super::*;

    fn fields(schema: Value) -> BTreeMap<String, FieldSummary> {
        summarize(&schema)
    }

    fn entry(version: &str, input: Value, output: Option<Value>) -> LockEntry {
        LockEntry {
            name: "t".into(),
            version: version.into(),
            input: SchemaLock::of(&input),
            output: output.as_ref().map(SchemaLock::of),
        }
    }

    fn obj(props: Value, required: &[&str]) -> Value {
        json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
    }

    #[test]
    fn fingerprint_is_fnv1a_128_of_canonical_json() {
        // The published FNV-1a 128 test vectors.
        assert_eq!(format!("{:032x}", fnv1a_128(b"")), "6c62272e07bb014262b821756295c58d");
        assert_eq!(format!("{:032x}", fnv1a_128(b"a")), "d228cb696f1a8caf78912b704e4a8964");
        assert_eq!(format!("{:032x}", fnv1a_128(b"foobar")), "343e1662793c64bf6f0d3597ba446f18");
        assert_eq!(fingerprint(&json!({"a": 1, "b": 2})), fingerprint(&json!({"b": 2, "a": 1})));
        assert_ne!(fingerprint(&json!({"a": 1})), fingerprint(&json!({"a": 2})));
        assert_eq!(fingerprint(&json!({"b": 2, "a": 1})), format!("fnv1a128:{:032x}", fnv1a_128(br#"{"a":1,"b":2}"#)));
        assert_eq!(fingerprint(&json!({"$schema": "x", "a": 1})), fingerprint(&json!({"a": 1})));
    }

    #[test]
    fn summary_resolves_refs_unions_and_items() {
        let schema = json!({
            "type": "object",
            "properties": {
                "id": {"type": "string", "pattern": "^INC-"},
                "limit": {"type": ["integer", "null"], "minimum": 0},
                "address": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "level": {"$ref": "#/$defs/Level"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "tree": {"$ref": "#/$defs/Node"}
            },
            "required": ["id", "level"],
            "$defs": {
                "Address": obj(json!({"street": {"type": "string"}, "zip": {"type": "string"}}), &["street"]),
                "Level": {"type": "string", "enum": ["low", "high"]},
                "Node": obj(json!({"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}), &[])
            }
        });
        let f = fields(schema);
        assert!(f[""].required);
        assert_eq!(f[""].types, ["object"]);
        assert!(f["id"].required);
        assert_eq!(f["id"].constraints["pattern"], "^INC-");
        assert!(!f["limit"].required);
        assert_eq!(f["limit"].types, ["integer", "null"]);
        assert_eq!(f["address"].types, ["null", "object"]);
        assert!(f["address.street"].required, "required within its parent");
        assert!(!f["address.zip"].required);
        assert_eq!(f["tags[]"].types, ["string"]);
        assert_eq!(f["level"].values, Some(vec![json!("high"), json!("low")]));
        assert_eq!(f["labels.*"].types, ["string"]);
        assert_eq!(f["tree.children[]"].recursive.as_deref(), Some("Node"));
        assert!(!f.contains_key("tree.children[].children"));
    }

    #[test]
    fn tagged_union_properties_are_required_only_when_every_branch_requires_them() {
        let schema = json!({"type": "object", "properties": {"shape": {"oneOf": [
            obj(json!({"kind": {"const": "circle"}, "r": {"type": "number"}}), &["kind", "r"]),
            obj(json!({"kind": {"const": "square"}, "side": {"type": "number"}}), &["kind", "side"]),
        ]}}, "required": ["shape"]});
        let f = fields(schema);
        assert!(f["shape.kind"].required);
        assert_eq!(f["shape.kind"].values, Some(vec![json!("circle"), json!("square")]));
        assert!(!f["shape.r"].required);
        assert!(!f["shape.side"].required);
    }

    #[test]
    fn input_changes_are_classified() {
        let v1 = obj(json!({"a": {"type": "string"}, "b": {"type": "integer"}}), &["a"]);
        let cases = [
            (obj(json!({"a": {"type": "string"}}), &["a"]), ChangeLevel::Breaking, "argument `b` was removed"),
            (
                obj(json!({"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "string"}}), &["a"]),
                ChangeLevel::Additive,
                "new optional argument `c`",
            ),
            (
                obj(json!({"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "string"}}), &["a", "c"]),
                ChangeLevel::Breaking,
                "new required argument `c`",
            ),
            (
                obj(json!({"a": {"type": "string"}, "b": {"type": "integer"}}), &["a", "b"]),
                ChangeLevel::Breaking,
                "argument `b` is now required",
            ),
            (
                obj(json!({"a": {"type": "string"}, "b": {"type": "integer"}}), &[]),
                ChangeLevel::Additive,
                "argument `a` is no longer required",
            ),
            (
                obj(json!({"a": {"type": "string"}, "b": {"type": "number"}}), &["a"]),
                ChangeLevel::Additive,
                "argument `b`: type widened from integer to number",
            ),
            (
                obj(json!({"a": {"type": "string", "maxLength": 5}, "b": {"type": "integer"}}), &["a"]),
                ChangeLevel::Breaking,
                "argument `a`: new constraint `maxLength` (5)",
            ),
            (
                obj(json!({"a": {"type": "string", "description": "A."}, "b": {"type": "integer"}}), &["a"]),
                ChangeLevel::Other,
                "the argument schema changed without a structural change",
            ),
        ];
        for (v2, level, message) in cases {
            let changes = compare(&entry("1.0", v1.clone(), None), &entry("1.0", v2, None));
            assert_eq!(changes[0].level, level, "{changes:?}");
            assert!(changes.iter().any(|c| c.message.starts_with(message)), "{message}: {changes:?}");
        }
    }

    #[test]
    fn output_changes_are_classified_the_other_way() {
        let input = obj(json!({}), &[]);
        let out1 = obj(json!({"id": {"type": "string"}, "level": {"enum": ["low", "high"]}}), &["id", "level"]);
        let with = |out: Value| entry("1.0", input.clone(), Some(out));
        let c = compare(&with(out1.clone()), &with(obj(json!({"id": {"type": "string"}}), &["id"])));
        assert_eq!(c[0], Change { level: ChangeLevel::Breaking, message: "result field `level` was removed".into() });
        let c = compare(
            &with(out1.clone()),
            &with(obj(
                json!({"id": {"type": "string"}, "level": {"enum": ["low", "high", "urgent"]}}),
                &["id", "level"],
            )),
        );
        assert_eq!(c[0].level, ChangeLevel::Breaking);
        assert_eq!(c[0].message, "result field `level`: value(s) \"urgent\" added");
        let c = compare(
            &with(out1.clone()),
            &with(obj(
                json!({"id": {"type": "string"}, "level": {"enum": ["low", "high"]}, "at": {"type": "string"}}),
                &["id", "level", "at"],
            )),
        );
        assert_eq!(c, [Change { level: ChangeLevel::Additive, message: "new result field `at`".into() }]);
        let c = compare(&with(json!({"type": "string"})), &with(json!({"type": ["string", "null"]})));
        assert_eq!(c[0].level, ChangeLevel::Breaking);
        assert_eq!(c[0].message, "the result: type widened from string to null | string");
    }

    #[test]
    fn version_rule() {
        use ChangeLevel::*;
        assert!(bump_satisfies("1.0", "2.0", Breaking));
        assert!(!bump_satisfies("1.0", "1.9", Breaking));
        assert!(bump_satisfies("1.0", "1.1", Additive));
        assert!(!bump_satisfies("1.0", "1.0.1", Additive));
        assert!(bump_satisfies("1.0", "1.0.1", Other));
        assert!(!bump_satisfies("1.0", "1.0", Other));
        assert!(!bump_satisfies("1.0", "1.0.0", Other));
        assert!(bump_satisfies("0.3", "0.4", Breaking));
        assert!(!bump_satisfies("0.3", "0.3.1", Breaking));
        assert!(bump_satisfies("0.3", "0.3.1", Additive));
        assert_eq!(required_version("1.4", Breaking).as_deref(), Some("2.0"));
        assert_eq!(required_version("1.4.2", Additive).as_deref(), Some("1.5"));
        assert_eq!(required_version("1.4", Other).as_deref(), Some("1.4.1"));
        assert_eq!(required_version("0.4.1", Breaking).as_deref(), Some("0.5"));
    }

    #[test]
    fn check_statuses_and_file_round_trip() {
        let v1 = obj(json!({"a": {"type": "string"}}), &["a"]);
        let locked = Lock { keel_lock: FORMAT, tools: vec![entry("1.0", v1.clone(), None)], remote: BTreeMap::new() };
        let text = locked.to_json();
        assert_eq!(Lock::parse(&text).unwrap(), locked);
        assert_eq!(Lock::parse(&text).unwrap().to_json(), text);

        let current = |version: &str, input: Value| Lock {
            keel_lock: FORMAT,
            tools: vec![entry(version, input, None)],
            remote: BTreeMap::new(),
        };
        let v2 = obj(json!({}), &[]);
        let r = check_lock(&current("1.0", v1.clone()), &locked);
        assert!(r.is_ok() && r.is_current());
        let r = check_lock(&current("1.0", v2.clone()), &locked);
        assert!(!r.is_ok());
        assert!(r.to_string().contains("bump it to 2.0 or later"), "{r}");
        assert!(r.to_string().contains("breaking: argument `a` was removed"), "{r}");
        let r = check_lock(&current("2.0", v2), &locked);
        assert!(r.is_ok() && !r.is_current(), "{r}");
        let r = check_lock(&current("0.9", v1.clone()), &locked);
        assert!(matches!(r.tools[0].status, ToolStatus::VersionDecreased { .. }));
        let r = check_lock(&current("1.1", v1), &locked);
        assert!(r.is_ok() && !r.is_current());
        let r = check_lock(&Lock { keel_lock: FORMAT, tools: vec![], remote: BTreeMap::new() }, &locked);
        assert!(matches!(r.tools[0].status, ToolStatus::Removed { .. }));
        let r = check_lock(&locked, &Lock { keel_lock: FORMAT, tools: vec![], remote: BTreeMap::new() });
        assert!(matches!(r.tools[0].status, ToolStatus::Added { .. }));
    }

    #[test]
    fn scalar_arrays_are_inlined() {
        let v = json!({"a": ["x", "y,]", 1, -2.5, true, null], "b": [{"c": [1]}], "d": []});
        let pretty = serde_json::to_string_pretty(&v).unwrap();
        let inlined = inline_scalar_arrays(&pretty);
        assert!(inlined.contains(r#""a": ["x", "y,]", 1, -2.5, true, null],"#), "{inlined}");
        assert!(inlined.contains(r#""c": [1]"#), "{inlined}");
        assert_eq!(serde_json::from_str::<Value>(&inlined).unwrap(), v);
    }

    #[test]
    fn parse_errors() {
        assert!(Lock::parse("not json").is_err());
        assert!(Lock::parse(r#"{"keel_lock": 2, "tools": []}"#).unwrap_err().to_string().contains("format 2"));
        let e = entry("1.0", obj(json!({}), &[]), None);
        let twice = Lock { keel_lock: FORMAT, tools: vec![e.clone(), e], remote: BTreeMap::new() };
        let text = serde_json::to_string(&twice).unwrap();
        assert!(Lock::parse(&text).unwrap_err().to_string().contains("appears twice"));
    }

    /// 40 definitions, each referring to the next one twice: 2^40 nodes if expanded naively.
    fn exponential() -> Value {
        let mut defs = serde_json::Map::new();
        for i in 0..40 {
            let next = json!({"$ref": format!("#/$defs/D{}", i + 1)});
            defs.insert(format!("D{i}"), json!({"type": "object", "properties": {"a": next, "b": next}}));
        }
        defs.insert("D40".into(), json!({"type": "string"}));
        json!({"$ref": "#/$defs/D0", "$defs": defs})
    }

    #[test]
    fn hostile_schemas_do_not_panic() {
        let mut deep = json!({"type": "string"});
        for _ in 0..500 {
            deep = json!({"type": "object", "properties": {"x": deep}});
        }
        for s in [
            json!(null),
            json!([1, 2]),
            json!({"$ref": "#"}),
            json!({"$ref": "#/nowhere"}),
            json!({"allOf": [{"$ref": "#"}]}),
            json!({"anyOf": []}),
            json!({"properties": {"a": 1}, "required": "a"}),
            json!({"items": [true, false]}),
            deep,
            exponential(),
        ] {
            let a = SchemaLock::of(&s);
            let _ = compare_schemas(&a, &SchemaLock::of(&json!({})), Side::Input);
            let _ = compare_schemas(&a, &SchemaLock::of(&json!({})), Side::Output);
        }
    }
}
