//! Classifying the changes between two locked versions of a tool ([`compare`]) and the version bump each needs.

use std::collections::BTreeSet;
use std::fmt;

use serde::Serialize;
use serde_json::Value;

use keel_tools_core::name::parse_version;
use keel_tools_schema::canonical::canonical_json;
use keel_tools_schema::vocabulary;

use super::{LockEntry, SchemaLock};

/// How much a change matters to callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeLevel {
    /// Only descriptions or other annotations: needs a patch bump.
    Other,
    /// Callers keep working: needs a minor bump.
    Additive,
    /// Some callers break: needs a major bump.
    Breaking,
}

impl ChangeLevel {
    /// `other`, `additive` or `breaking`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeLevel::Other => "other",
            ChangeLevel::Additive => "additive",
            ChangeLevel::Breaking => "breaking",
        }
    }
}

impl fmt::Display for ChangeLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One difference between the locked and the current schemas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// How much it matters.
    pub level: ChangeLevel,
    /// What changed, e.g. "argument `incident_id` was removed".
    pub message: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Input,
    Output,
}

impl Side {
    pub(super) fn field(self, path: &str) -> String {
        match (self, path.is_empty()) {
            (Side::Input, true) => "the arguments".to_owned(),
            (Side::Output, true) => "the result".to_owned(),
            (Side::Input, false) => format!("argument `{path}`"),
            (Side::Output, false) => format!("result field `{path}`"),
        }
    }
    /// The level of a change that widens what this side allows.
    pub(super) fn widen(self) -> ChangeLevel {
        match self {
            Side::Input => ChangeLevel::Additive,
            Side::Output => ChangeLevel::Breaking,
        }
    }
    /// The level of a change that narrows what this side allows.
    pub(super) fn narrow(self) -> ChangeLevel {
        match self {
            Side::Input => ChangeLevel::Breaking,
            Side::Output => ChangeLevel::Additive,
        }
    }
}

pub(super) fn is_below(path: &str, parent: &str) -> bool {
    path.len() > parent.len()
        && path.starts_with(parent)
        && (parent.is_empty() || matches!(path.as_bytes()[parent.len()], b'.' | b'['))
}

/// Whether `types` (empty: any) accepts values of type `t`.
pub(super) fn covers(types: &[String], t: &str) -> bool {
    types.is_empty() || types.iter().any(|x| x == t) || (t == "integer" && types.iter().any(|x| x == "number"))
}

pub(super) fn show_types(types: &[String]) -> String {
    if types.is_empty() { "any".to_owned() } else { types.join(" | ") }
}

pub(super) fn show_values(values: &[Value]) -> String {
    values.iter().map(canonical_json).collect::<Vec<_>>().join(", ")
}

/// Whether a larger value of this constraint allows more values (`maximum`), fewer (`minimum`), or neither.
pub(super) fn compare_schemas(old: &SchemaLock, new: &SchemaLock, side: Side) -> Vec<Change> {
    let mut changes = Vec::new();
    let mut push = |level: ChangeLevel, message: String| changes.push(Change { level, message });
    let (o, n) = (&old.fields, &new.fields);

    let removed: Vec<&String> = o.keys().filter(|p| !n.contains_key(*p)).collect();
    for p in &removed {
        if removed.iter().any(|q| is_below(p, q)) {
            continue;
        }
        push(ChangeLevel::Breaking, format!("{} was removed", side.field(p)));
    }
    let added: Vec<&String> = n.keys().filter(|p| !o.contains_key(*p)).collect();
    for p in &added {
        if added.iter().any(|q| is_below(p, q)) {
            continue;
        }
        let required = n[*p].required;
        match side {
            Side::Input if required => push(ChangeLevel::Breaking, format!("new required argument `{p}`")),
            Side::Input => push(ChangeLevel::Additive, format!("new optional argument `{p}`")),
            Side::Output => push(ChangeLevel::Additive, format!("new result field `{p}`")),
        }
    }

    for (p, before) in o {
        let Some(after) = n.get(p) else { continue };
        let field = side.field(p);
        match (before.required, after.required) {
            (false, true) if side == Side::Input => push(ChangeLevel::Breaking, format!("{field} is now required")),
            (true, false) if side == Side::Input => {
                push(ChangeLevel::Additive, format!("{field} is no longer required"))
            }
            (false, true) => push(ChangeLevel::Additive, format!("{field} is now always present")),
            (true, false) => push(ChangeLevel::Breaking, format!("{field} may now be absent")),
            _ => {}
        }

        let lost: Vec<&String> = before.types.iter().filter(|t| !covers(&after.types, t)).collect();
        let lost_any = !before.types.is_empty() && after.types.is_empty();
        let gained: Vec<&String> = after.types.iter().filter(|t| !covers(&before.types, t)).collect();
        let narrowed = !lost.is_empty() || (before.types.is_empty() && !after.types.is_empty());
        if narrowed {
            push(
                side.narrow(),
                format!("{field}: type narrowed from {} to {}", show_types(&before.types), show_types(&after.types)),
            );
        }
        if !gained.is_empty() || lost_any {
            push(
                side.widen(),
                format!("{field}: type widened from {} to {}", show_types(&before.types), show_types(&after.types)),
            );
        }

        match (&before.values, &after.values) {
            (None, Some(v)) => push(side.narrow(), format!("{field} is now restricted to {}", show_values(v))),
            (Some(_), None) => push(side.widen(), format!("{field} is no longer restricted to fixed values")),
            (Some(b), Some(a)) => {
                let bs: BTreeSet<String> = b.iter().map(canonical_json).collect();
                let as_: BTreeSet<String> = a.iter().map(canonical_json).collect();
                let gone: Vec<String> = bs.difference(&as_).cloned().collect();
                let new: Vec<String> = as_.difference(&bs).cloned().collect();
                if !gone.is_empty() {
                    push(side.narrow(), format!("{field}: value(s) {} removed", gone.join(", ")));
                }
                if !new.is_empty() {
                    push(side.widen(), format!("{field}: value(s) {} added", new.join(", ")));
                }
            }
            (None, None) => {}
        }

        let keys: BTreeSet<&String> = before.constraints.keys().chain(after.constraints.keys()).collect();
        for k in keys {
            match (before.constraints.get(k), after.constraints.get(k)) {
                (Some(b), None) => push(side.widen(), format!("{field}: constraint `{k}` ({b}) removed")),
                (None, Some(a)) => push(side.narrow(), format!("{field}: new constraint `{k}` ({a})")),
                (Some(b), Some(a)) if b != a => {
                    // The vocabulary's subset question: does the new constraint accept no more than the old?
                    let (level, how) = match vocabulary::constraint_narrows(k, a, b) {
                        Some(true) => (side.narrow(), "tightened"),
                        Some(false) => (side.widen(), "loosened"),
                        None => (ChangeLevel::Breaking, "changed"),
                    };
                    push(level, format!("{field}: constraint `{k}` {how} from {b} to {a}"));
                }
                _ => {}
            }
        }
    }
    if changes.is_empty() && old.fingerprint != new.fingerprint {
        let what = match side {
            Side::Input => "the argument schema",
            Side::Output => "the result schema",
        };
        changes.push(Change {
            level: ChangeLevel::Other,
            message: format!("{what} changed without a structural change (descriptions, titles, defaults or examples)"),
        });
    }
    changes
}

/// Every difference between two entries of the same tool, most severe first.
pub fn compare(old: &LockEntry, new: &LockEntry) -> Vec<Change> {
    let mut changes = compare_schemas(&old.input, &new.input, Side::Input);
    match (&old.output, &new.output) {
        (Some(o), Some(n)) => changes.extend(compare_schemas(o, n, Side::Output)),
        (None, Some(_)) => changes
            .push(Change { level: ChangeLevel::Additive, message: "the tool now declares a result schema".to_owned() }),
        (Some(_), None) => changes.push(Change {
            level: ChangeLevel::Breaking,
            message: "the tool no longer declares a result schema".to_owned(),
        }),
        (None, None) => {}
    }
    changes.sort_by_key(|c| std::cmp::Reverse(c.level));
    changes
}

pub(super) type Version = (u32, u32, u32);

pub(super) fn show_version(v: Version) -> String {
    if v.2 == 0 { format!("{}.{}", v.0, v.1) } else { format!("{}.{}.{}", v.0, v.1, v.2) }
}

/// The smallest version after `old` that a change of `level` needs.
pub fn required_version(old: &str, level: ChangeLevel) -> Option<String> {
    let o = parse_version(old)?;
    let v = match (level, o.0) {
        (ChangeLevel::Breaking, 0) => (0, o.1 + 1, 0),
        (ChangeLevel::Breaking, _) => (o.0 + 1, 0, 0),
        (ChangeLevel::Additive, 0) | (ChangeLevel::Other, _) => (o.0, o.1, o.2 + 1),
        (ChangeLevel::Additive, _) => (o.0, o.1 + 1, 0),
    };
    Some(show_version(v))
}

/// Whether going from version `old` to `new` is enough for a change of `level` (see the module docs).
pub fn bump_satisfies(old: &str, new: &str, level: ChangeLevel) -> bool {
    let (Some(o), Some(n)) = (parse_version(old), parse_version(new)) else { return false };
    if n <= o {
        return false;
    }
    match (level, o.0) {
        (ChangeLevel::Other, _) | (ChangeLevel::Additive, 0) => true,
        (ChangeLevel::Additive, _) => n.0 > o.0 || n.1 > o.1,
        (ChangeLevel::Breaking, 0) => n.0 > 0 || n.1 > o.1,
        (ChangeLevel::Breaking, _) => n.0 > o.0,
    }
}
