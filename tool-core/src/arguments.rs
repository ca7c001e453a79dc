//! The canonical form of a call's arguments: what the executor validates, the policy and approvals judge, the
//! event log records and the handler receives.

use serde_json::{Map, Value};

use crate::tool_definition::ToolDefinition;
use keel_tools_schema::transform::accepts_null;
use keel_tools_schema::vocabulary::{MAX_DEPTH, resolve};

impl ToolDefinition {
    /// Brings `arguments` into their canonical form for this tool, in place; returns how many properties were
    /// removed. The executor does this to every call before validating it, so the policy, the approvals, the
    /// event log and the handler all see the same value, whichever provider (or person) wrote the call.
    ///
    /// Two spellings of the same call become one. At every level the schema describes (nested objects, array
    /// items, map values, `allOf` parts, and the union branch an object matches), an **optional** property (one
    /// the schema does not require) is removed when its value says "absent":
    ///
    /// - a `null` the property does not accept: how a model in OpenAI strict mode, where every property is
    ///   required and nullable, says "not given" for a `#[serde(default)]` field;
    /// - a `null` for a property whose `default` is `null` or unstated (an `Option<T>` field): `null` and absence
    ///   both read as `None`;
    /// - a value equal to the property's `default` (a spelled-out default): serde fills in the same default when
    ///   the property is absent. schemars states a `#[serde(default)]` field's default when the field's type
    ///   implements `Serialize`; a default the schema does not state is not known here, and its value is kept.
    ///
    /// Everything else is kept as sent: required properties (even `null`), a `null` for an optional property
    /// whose default is not `null` (it means `None`, not the default), values that differ from the default,
    /// unknown properties (validation rejects them), and arrays. Key order carries no meaning: comparisons use
    /// [`canonical JSON`](keel_tools_schema::canonical).
    ///
    /// One caveat of the third rule: a schema's `default` is the value serde's default function returned when the
    /// schema was generated. A default that changes at run time (the current time, say) should not be stated in
    /// the schema.
    pub fn canonical_arguments(&self, arguments: &mut Value) -> usize {
        let nulls = self.schemas().states_defaults() || may_hold_null(arguments, 0);
        self.canonical_arguments_known(arguments, nulls)
    }

    /// [`canonical_arguments`](Self::canonical_arguments) when the caller already knows whether `arguments` may
    /// hold a `null` (the executor learns it while checking the limits).
    pub(crate) fn canonical_arguments_known(&self, arguments: &mut Value, may_hold_null: bool) -> usize {
        // Most calls hold no `null`, and most schemas state no default: then there is nothing to remove.
        if !may_hold_null && !self.schemas().states_defaults() {
            return 0;
        }
        canonicalize(self.input_schema(), arguments)
    }
}

/// See [`ToolDefinition::canonical_arguments`]; `schema` is the tool's canonical input schema.
pub(crate) fn canonicalize(schema: &Value, arguments: &mut Value) -> usize {
    let mut removed = 0;
    walk(schema, schema, arguments, 0, &mut removed);
    removed
}

/// Whether `v` holds a `null`; past [`MAX_DEPTH`] it answers yes (the full walk has its own bound).
fn may_hold_null(v: &Value, depth: usize) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => depth >= MAX_DEPTH || a.iter().any(|x| may_hold_null(x, depth + 1)),
        Value::Object(o) => depth >= MAX_DEPTH || o.values().any(|x| may_hold_null(x, depth + 1)),
        _ => false,
    }
}

/// The `default` a property states, on the property itself or on the schema its `$ref` leads to.
fn default_of<'a>(root: &'a Value, prop: &'a Value) -> Option<&'a Value> {
    prop.get("default").or_else(|| resolve(root, prop).get("default"))
}

/// Equal as JSON values, numbers compared by value (`1` and `1.0` are the same number).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i128(), y.as_i128()) {
            // Integers exactly (an f64 cannot tell large ones apart); otherwise by value.
            (Some(a), Some(b)) => a == b,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| same(a, b)))
        }
        _ => a == b,
    }
}

/// Whether an optional property's value stands for "absent".
fn means_absent(root: &Value, prop: &Value, value: &Value) -> bool {
    match (value, default_of(root, prop)) {
        (Value::Null, None | Some(Value::Null)) => true,
        (Value::Null, Some(_)) => !accepts_null(root, prop),
        (v, Some(default)) => same(v, default),
        (_, None) => false,
    }
}

fn walk(root: &Value, schema: &Value, value: &mut Value, depth: usize, removed: &mut usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let Value::Object(s) = resolve(root, schema) else { return };
    match value {
        Value::Object(object) => {
            let props = s.get("properties").and_then(Value::as_object);
            let required =
                |key: &str| s.get("required").and_then(Value::as_array).is_some_and(|r| r.iter().any(|k| k == key));
            let extra = s.get("additionalProperties").filter(|v| v.is_object());
            let before = object.len();
            object.retain(|key, v| match props.and_then(|p| p.get(key)) {
                Some(prop) => required(key) || !means_absent(root, prop, v),
                None => true,
            });
            *removed += before - object.len();
            for (key, v) in object.iter_mut() {
                match props.and_then(|p| p.get(key)) {
                    Some(prop) => walk(root, prop, v, depth + 1, removed),
                    None => {
                        if let Some(extra) = extra {
                            walk(root, extra, v, depth + 1, removed);
                        }
                    }
                }
            }
            if let Some(Value::Array(all)) = s.get("allOf") {
                for part in all {
                    walk(root, part, value, depth + 1, removed);
                }
            }
            for keyword in ["anyOf", "oneOf"] {
                if let Some(Value::Array(branches)) = s.get(keyword) {
                    for branch in branches {
                        let Value::Object(object) = &*value else { return };
                        if branch_matches(root, branch, object) {
                            walk(root, branch, value, depth + 1, removed);
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            let prefix = s.get("prefixItems").and_then(Value::as_array);
            if let Some(prefix) = prefix {
                for (item, item_schema) in items.iter_mut().zip(prefix) {
                    walk(root, item_schema, item, depth + 1, removed);
                }
            }
            if let Some(item_schema) = s.get("items").filter(|i| i.is_object()) {
                for item in items.iter_mut().skip(prefix.map_or(0, Vec::len)) {
                    walk(root, item_schema, item, depth + 1, removed);
                }
            }
        }
        _ => {}
    }
}

/// Whether a union branch describes this object: an object schema whose required properties are all present and
/// whose fixed-value properties (a tag) have their value.
fn branch_matches(root: &Value, branch: &Value, object: &Map<String, Value>) -> bool {
    let branch = resolve(root, branch);
    let Some(props) = branch.get("properties").and_then(Value::as_object) else { return false };
    let required_present = branch
        .get("required")
        .and_then(Value::as_array)
        .is_none_or(|r| r.iter().filter_map(Value::as_str).all(|k| object.contains_key(k)));
    let tags_match = props.iter().all(|(name, prop)| {
        let prop = resolve(root, prop);
        let fixed = prop
            .get("const")
            .or_else(|| prop.get("enum").and_then(Value::as_array).filter(|e| e.len() == 1).and_then(|e| e.first()));
        match (fixed, object.get(name)) {
            (Some(expected), Some(actual)) => expected == actual,
            _ => true,
        }
    });
    required_present && tags_match
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn canonical(schema: &Value, mut args: Value) -> Value {
        canonicalize(schema, &mut args);
        args
    }

    /// What schemars generates for `{title: String, body: String, #[serde(default)] priority: Priority (default
    /// "normal"), note: Option<String>, #[serde(default = "some_limit")] limit: Option<u32> (default 10),
    /// tags: Vec<String> (default [])}`.
    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "body": {"type": ["string", "null"]},
                "priority": {"$ref": "#/$defs/Priority", "default": "normal"},
                "note": {"type": ["string", "null"]},
                "limit": {"type": ["integer", "null"], "default": 10},
                "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}, "default": []},
                "owner": {"anyOf": [{"$ref": "#/$defs/Owner"}, {"type": "null"}]}
            },
            "required": ["title", "body"],
            "additionalProperties": false,
            "$defs": {
                "Priority": {"type": "string", "enum": ["low", "normal", "high"]},
                "Tag": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "weight": {"type": "number", "default": 1.0}},
                    "required": ["name"]
                },
                "Owner": {
                    "type": "object",
                    "properties": {"team": {"type": "string"}, "pager": {"type": ["boolean", "null"]}},
                    "required": ["team"]
                }
            }
        })
    }

    #[test]
    fn absent_spellings_are_removed() {
        let s = schema();
        let minimal = json!({"title": "t", "body": "b"});
        for spelled in [
            json!({"title": "t", "body": "b", "priority": null}),
            json!({"title": "t", "body": "b", "priority": "normal"}),
            json!({"title": "t", "body": "b", "note": null}),
            json!({"title": "t", "body": "b", "limit": 10}),
            json!({"title": "t", "body": "b", "limit": 10.0}),
            json!({"title": "t", "body": "b", "tags": []}),
            json!({"title": "t", "body": "b", "owner": null}),
            json!({"title": "t", "body": "b", "priority": null, "note": null, "limit": 10, "tags": [], "owner": null}),
        ] {
            assert_eq!(canonical(&s, spelled.clone()), minimal, "{spelled}");
        }
    }

    #[test]
    fn meaningful_values_are_kept() {
        let s = schema();
        for kept in [
            // Required, even when null.
            json!({"title": "t", "body": null}),
            // A null whose default is not null means `None`.
            json!({"title": "t", "body": "b", "limit": null}),
            json!({"title": "t", "body": "b", "limit": 11}),
            json!({"title": "t", "body": "b", "priority": "high"}),
            json!({"title": "t", "body": "b", "tags": [{"name": "x"}]}),
            // Unknown properties stay for validation to reject.
            json!({"title": "t", "body": "b", "unknown": null}),
        ] {
            assert_eq!(canonical(&s, kept.clone()), kept);
        }
    }

    #[test]
    fn nested_objects_items_and_matching_branches_are_canonical_too() {
        let s = schema();
        let args = json!({"title": "t", "body": "b",
            "tags": [{"name": "x", "weight": 1}, {"name": "y", "weight": 2}],
            "owner": {"team": "sre", "pager": null}});
        let expected = json!({"title": "t", "body": "b",
            "tags": [{"name": "x"}, {"name": "y", "weight": 2}],
            "owner": {"team": "sre"}});
        assert_eq!(canonical(&s, args), expected);
        // Idempotent.
        assert_eq!(canonical(&s, expected.clone()), expected);
    }

    #[test]
    fn hostile_schemas_and_arguments_do_not_panic() {
        let deep = (0..300).fold(json!(null), |v, _| json!({"a": v}));
        for s in
            [json!(true), json!([]), json!({"$ref": "#"}), json!({"properties": {"a": {"$ref": "#"}}}), deep.clone()]
        {
            for args in [json!({"a": null}), deep.clone(), json!([1, {"a": null}])] {
                let _ = canonical(&s, args);
            }
        }
    }
}
