//! What the two strict subsets (OpenAI's strict mode, Anthropic's strict tool use) share: the steps every node goes
//! through before and after the subset's own rules, driven by each subset's [`Rules`] (its name in messages and its
//! keyword tables). Each subset keeps what only it does: OpenAI's nullable optional properties and distributed
//! unions, Anthropic's split type lists.

use serde_json::{Map, Value};

use crate::transform::{self, FieldPath};
use crate::vocabulary::MAX_DEPTH;

/// One strict subset's tables.
pub(super) struct Rules {
    /// The subset as messages name it: `OpenAI strict mode`.
    pub(super) name: &'static str,
    /// The `format`s it accepts; another is folded into the description.
    pub(super) formats: &'static [&'static str],
    /// Keywords it keeps.
    pub(super) kept: &'static [&'static str],
    /// Keywords it rejects that only narrow a value: folded into the description (the executor still enforces them).
    pub(super) folded: &'static [&'static str],
    /// Keywords that change which values are valid in ways it cannot express: the schema cannot be strict.
    pub(super) unsupported: &'static [&'static str],
}

impl Rules {
    /// Why the top level of an inlined schema cannot be strict: it is not a single object schema.
    pub(super) fn top_level(&self, inlined: &Value) -> Result<(), String> {
        let top_is_object = inlined.get("type").and_then(Value::as_str) == Some("object");
        let top_is_union = ["anyOf", "oneOf", "allOf"].iter().any(|k| inlined.get(*k).is_some());
        if top_is_object && !top_is_union {
            return Ok(());
        }
        Err(format!(
            "the top-level arguments are not a single object schema{}; {} needs one object at the top level",
            if top_is_union { " (they are a union, e.g. a struct with a flattened enum)" } else { "" },
            self.name
        ))
    }

    /// The first steps of a node: it is a schema object within the depth limit, with no unsupported keyword and no
    /// tuple, its `allOf` merged and its `oneOf` made an `anyOf`.
    pub(super) fn open(&self, node: Value, subject: &str, depth: usize) -> Result<Map<String, Value>, String> {
        if depth > MAX_DEPTH {
            return Err(format!("{subject} is nested too deeply"));
        }
        let mut map = match node {
            Value::Object(map) => map,
            Value::Bool(true) => return Err(self.any_value(subject)),
            Value::Bool(false) => return Err(format!("{subject} accepts no value at all")),
            _ => return Err(format!("{subject} is not a schema")),
        };
        if let Some(keyword) = self.unsupported.iter().find(|k| map.contains_key(**k)) {
            return Err(format!("{subject} uses `{keyword}`, which {} does not support", self.name));
        }
        if map.contains_key("prefixItems") || map.get("items").is_some_and(Value::is_array) {
            return Err(format!("{subject} is a tuple (prefixItems), which {} does not support", self.name));
        }
        if !transform::merge_all_of(&mut map) {
            return Err(format!(
                "{subject} uses an `allOf` that cannot be merged, which {} does not support",
                self.name
            ));
        }
        match (map.shift_remove("oneOf"), map.contains_key("anyOf")) {
            (Some(_), true) => {
                return Err(format!("{subject} uses both `anyOf` and `oneOf`, which {} cannot express", self.name));
            }
            (Some(one_of), false) => {
                map.insert("anyOf".to_owned(), one_of);
            }
            (None, _) => {}
        }
        Ok(map)
    }

    /// Folds a `format` the subset does not accept into the description, and adds the notes to `notes`.
    pub(super) fn fold_format(&self, map: &mut Map<String, Value>, notes: &mut Vec<String>) {
        if let Some(format) = map.get("format").and_then(Value::as_str)
            && !self.formats.contains(&format)
        {
            notes.extend(transform::fold_keywords(map, &["format"]));
        }
    }

    /// Folds the narrowing keywords into the description (adding the notes to `notes`), then drops every keyword
    /// the subset does not keep, but those `also_kept`.
    pub(super) fn fold_and_keep(&self, map: &mut Map<String, Value>, notes: &mut Vec<String>, also_kept: &[&str]) {
        notes.extend(transform::fold_keywords(map, self.folded));
        map.retain(|k, _| self.kept.contains(&k.as_str()) || also_kept.contains(&k.as_str()));
    }

    /// The last steps of a node: an array's `items` converted by `convert` (a non-array loses them), and the
    /// notes appended to the description.
    pub(super) fn finish(
        &self,
        mut map: Map<String, Value>,
        subject: &str,
        is_array: bool,
        notes: &[String],
        path: &mut FieldPath,
        convert: impl FnOnce(Value, &mut FieldPath) -> Result<Value, String>,
    ) -> Result<Value, String> {
        if is_array {
            let Some(items) = map.get_mut("items") else {
                return Err(format!(
                    "{subject} is an array of unspecified items; {} needs a type for every value",
                    self.name
                ));
            };
            path.push_raw("[]");
            let converted = convert(std::mem::take(items), path);
            path.pop();
            *items = converted?;
        } else {
            map.shift_remove("items");
        }
        transform::append_notes(&mut map, notes);
        Ok(Value::Object(map))
    }

    /// A node that accepts any JSON value.
    pub(super) fn any_value(&self, subject: &str) -> String {
        format!("{subject} accepts any JSON value; {} needs a type for every value", self.name)
    }

    /// Whether an object's `additionalProperties` closes it: `false`, or absent when it lists properties. `absent`
    /// decides the absent case with more to check (OpenAI's `unevaluatedProperties`).
    pub(super) fn closed(
        &self,
        map: &mut Map<String, Value>,
        subject: &str,
        absent: impl FnOnce(&Map<String, Value>) -> Result<(), String>,
    ) -> Result<(), String> {
        let closed = |why: &str| format!("{subject} {why}; {} needs every object closed", self.name);
        match map.shift_remove("additionalProperties") {
            Some(Value::Bool(false)) => {}
            Some(Value::Bool(true)) => return Err(closed("accepts any keys (additionalProperties is true)")),
            Some(_) => return Err(closed("is a map (additionalProperties is a schema)")),
            None => absent(map)?,
        }
        map.insert("additionalProperties".to_owned(), Value::Bool(false));
        Ok(())
    }

    /// An object with no properties listed and nothing that closes it.
    pub(super) fn unspecified_properties(&self, subject: &str) -> String {
        format!("{subject} is an object with unspecified properties; {} needs every object closed", self.name)
    }

    /// An object that requires a property it does not describe.
    pub(super) fn undescribed_required(&self, subject: &str, missing: &str) -> String {
        format!(
            "{subject} requires `{missing}` without describing it; {} needs every required property in `properties`",
            self.name
        )
    }
}

/// Whether an object schema lists at least one property.
pub(super) fn has_properties(map: &Map<String, Value>) -> bool {
    map.get("properties").and_then(Value::as_object).is_some_and(|p| !p.is_empty())
}
