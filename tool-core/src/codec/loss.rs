//! What a provider's format does not carry: each codec's losses, as data.

use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};

use super::format::Push;
use crate::tool_definition::ToolDefinition;
use crate::tool_schemas::Provider;
use keel_tools_schema::vocabulary::{self, MAX_DEPTH};

/// Something of a tool's contract that a provider's format does not carry to the model as the canonical schema
/// says it, found by that provider's [`Codec`](crate::Codec) ([`Codec::losses`](crate::Codec::losses)).
///
/// `at` is a JSON pointer into the tool's entry in [`Codec::tools`](crate::Codec::tools) (or, for a loss of the
/// provider's reply format, `tool` is `*` and `at` points into a reply), so that what a provider's own SDK drops
/// can be matched with the loss that announced it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Loss {
    /// The provider.
    #[serde(serialize_with = "provider_label")]
    pub provider: Provider,
    /// The tool name; `*` for a loss of the provider's format itself (its replies).
    pub tool: String,
    /// Where: a JSON pointer into the tool's entry (into a reply when `tool` is `*`); empty for the whole entry.
    pub at: String,
    /// What becomes of it.
    pub kind: LossKind,
    /// What happens, in a sentence.
    pub message: String,
}

/// What becomes of what a format does not carry.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LossKind {
    /// Carried in another form, nothing lost to the model: a constraint said in the description, a wire name
    /// mapped back, a result sent as text.
    Adapted,
    /// Part of the contract does not reach the model as written: the provider, or its client library, drops it
    /// (a keyword, a recursive type's shape beyond its stand-in) or cannot hold the model to it (a schema OpenAI
    /// cannot take in strict mode). The executor still enforces it: arguments are validated against the
    /// canonical schema.
    Dropped,
    /// An annotation the provider does not read (`examples`, `readOnly`, `$comment`, ...): it constrains
    /// nothing, so the model is not misled about what the executor accepts.
    Ignored,
    /// The provider refuses the tool.
    Rejected,
}

impl LossKind {
    /// `adapted`, `dropped` or `rejected`.
    pub fn as_str(self) -> &'static str {
        match self {
            LossKind::Adapted => "adapted",
            LossKind::Dropped => "dropped",
            LossKind::Ignored => "ignored",
            LossKind::Rejected => "rejected",
        }
    }
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {} {}", self.provider.as_str(), self.tool, self.kind.as_str())?;
        if !self.at.is_empty() {
            write!(f, " at {}", self.at)?;
        }
        write!(f, ": {}", self.message)
    }
}

fn provider_label<S: serde::Serializer>(p: &Provider, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(p.as_str())
}

/// A dotted name is sent as its wire name (`incident.search` as `incident-search`) and mapped back.
pub(super) fn wire_name_loss(def: &ToolDefinition, label: &str, at: &str, push: &mut Push<'_>) {
    if def.name() != def.wire_name() {
        push(
            at.to_owned(),
            LossKind::Adapted,
            format!(
                "{label} is sent the wire name `{}` (dots are not allowed there); keel maps it back with \
                 ToolView::get_by_wire_name",
                def.wire_name()
            ),
        );
    }
}

/// A JSON pointer segment for `key` (`~` and `/` escaped).
pub(crate) fn segment(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// What [`walk`] calls: `(path, pointer, schema)`.
pub(super) type Visit<'a> = dyn FnMut(&str, &str, &Map<String, Value>) + 'a;

/// Calls `f(path, pointer, schema)` for every subschema object of `schema`: properties (path `a.b`), items
/// (`a[]`), map values (`a.*`), union and conjunction branches (the same path), definitions (`$defs.Name`).
/// `pointer` is the JSON pointer of the subschema inside `schema`.
pub(super) fn walk(schema: &Value, f: &mut Visit<'_>) {
    walk_at(schema, "", "", 0, f);
}

fn walk_at(schema: &Value, path: &str, pointer: &str, depth: usize, f: &mut Visit<'_>) {
    let Value::Object(map) = schema else { return };
    if depth > MAX_DEPTH {
        return;
    }
    f(path, pointer, map);
    vocabulary::for_each_child(schema, |keyword, name, child| {
        let at = match (keyword, name) {
            ("properties", Some(name)) => child_path(path, name),
            ("items" | "prefixItems", _) => child_path(path, "[]"),
            ("additionalProperties", _) => child_path(path, "*"),
            ("anyOf" | "oneOf" | "allOf", _) => path.to_owned(),
            ("$defs" | "definitions", Some(name)) => format!("$defs.{name}"),
            // The other applicators say nothing a provider drops that these paths do not already show.
            _ => return,
        };
        walk_at(child, &at, &child_pointer(map, pointer, keyword, name, child), depth + 1, f);
    });
}

/// The pointer of `child`, found under `keyword` (at `name`, or at its index in an array) of `parent`.
fn child_pointer(
    parent: &Map<String, Value>,
    pointer: &str,
    keyword: &str,
    name: Option<&str>,
    child: &Value,
) -> String {
    let mut out = format!("{pointer}/{}", segment(keyword));
    match (name, parent.get(keyword)) {
        (Some(name), _) => out.push_str(&format!("/{}", segment(name))),
        (None, Some(Value::Array(items))) => {
            if let Some(i) = items.iter().position(|v| std::ptr::eq(v, child)) {
                out.push_str(&format!("/{i}"));
            }
        }
        _ => {}
    }
    out
}

/// `parent.segment` as a path for messages (`a.b`, `a[]`, `(top level)[]`).
pub(super) fn child_path(parent: &str, segment: &str) -> String {
    match (parent.is_empty(), segment.starts_with('[')) {
        (true, true) => format!("(top level){segment}"),
        (true, false) => segment.to_owned(),
        (false, true) => format!("{parent}{segment}"),
        (false, false) => format!("{parent}.{segment}"),
    }
}

/// A path for the start of a message: `` `a.b` `` or "the top level".
pub(super) fn show_path(path: &str) -> String {
    if path.is_empty() { "the top level".to_owned() } else { format!("`{path}`") }
}

/// `` `a`, `b` ``.
pub(super) fn join_keywords(keywords: &[&str]) -> String {
    keywords.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
}

/// `pointer` if it points at something in `entry`, else its longest prefix that does: where in the entry a loss
/// found in another form of the schema (the canonical one) lands.
pub(super) fn nearest(entry: &Value, pointer: &str) -> String {
    let mut at = pointer;
    while !at.is_empty() && entry.pointer(at).is_none() {
        at = at.rfind('/').map_or("", |i| &at[..i]);
    }
    at.to_owned()
}
