//! The structural summary of a schema: each field's path, types, whether it is required, and its allowed values
//! ([`summarize`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use keel_tools_schema::canonical::canonical_json;
use keel_tools_schema::vocabulary::{self, MAX_DEPTH};

use super::{FieldSummary, NODE_BUDGET};

/// One schema node, with `$ref`s resolved and `allOf`/`anyOf`/`oneOf` merged.
#[derive(Debug, Clone, Default)]
pub(super) struct Node {
    /// Empty: any type.
    pub(super) types: BTreeSet<String>,
    /// Only null (a `{"type": "null"}` branch): contributes `null` to a union and nothing else.
    pub(super) null_only: bool,
    pub(super) values: Option<Vec<Value>>,
    pub(super) constraints: BTreeMap<String, Value>,
    pub(super) props: BTreeMap<String, (Node, bool)>,
    pub(super) items: Option<Box<Node>>,
    pub(super) tuple: Vec<Node>,
    pub(super) map_values: Option<Box<Node>>,
    pub(super) recursive: Option<String>,
}

/// Field path to summary for one schema.
pub fn summarize(schema: &Value) -> BTreeMap<String, FieldSummary> {
    let mut cx = Cx { refs: Vec::new(), budget: NODE_BUDGET };
    let node = describe(schema, schema, &mut cx, 0);
    let mut out = BTreeMap::new();
    flatten(&node, String::new(), true, &mut out);
    out
}

/// A JSON value with its object keys in sorted order, whatever `serde_json`'s map implementation.
pub(super) fn normalized(v: &Value) -> Value {
    serde_json::from_str(&canonical_json(v)).unwrap_or_else(|_| v.clone())
}

pub(super) fn sorted_values(values: impl IntoIterator<Item = Value>) -> Vec<Value> {
    let mut keyed: Vec<(String, Value)> = values.into_iter().map(|v| (canonical_json(&v), normalized(&v))).collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed.dedup_by(|a, b| a.0 == b.0);
    keyed.into_iter().map(|(_, v)| v).collect()
}

/// The walk's state: the references being expanded (for recursion) and the nodes left to visit.
pub(super) struct Cx {
    pub(super) refs: Vec<String>,
    pub(super) budget: usize,
}

pub(super) fn describe(root: &Value, schema: &Value, cx: &mut Cx, depth: usize) -> Node {
    let map = match schema {
        Value::Object(map) => map,
        Value::Bool(false) => return Node { types: BTreeSet::from(["never".to_owned()]), ..Node::default() },
        _ => return Node::default(),
    };
    if depth > MAX_DEPTH || cx.budget == 0 {
        return Node::default();
    }
    cx.budget -= 1;
    let mut node = Node::default();

    if let Some(Value::String(reference)) = map.get("$ref") {
        let name = reference.rsplit('/').next().unwrap_or(reference).to_owned();
        let name = if name == "#" || name.is_empty() { "the top level".to_owned() } else { name };
        if cx.refs.contains(reference) {
            node.recursive = Some(name);
        } else if let Some(target) = local_target(root, reference) {
            cx.refs.push(reference.clone());
            node = describe(root, target, cx, depth + 1);
            cx.refs.pop();
        }
    }

    match map.get("type") {
        Some(Value::String(t)) => {
            node.types = BTreeSet::from([t.clone()]);
        }
        Some(Value::Array(ts)) => {
            node.types = ts.iter().filter_map(Value::as_str).map(str::to_owned).collect();
        }
        _ => {}
    }
    let literal = match (map.get("const"), map.get("enum")) {
        (Some(c), _) => Some(vec![c.clone()]),
        (None, Some(Value::Array(values))) => Some(values.clone()),
        _ => None,
    };
    if let Some(values) = literal {
        if node.types.is_empty() {
            node.types = values.iter().map(|v| keel_tools_schema::vocabulary::instance_type(v).to_owned()).collect();
        }
        node.values = Some(sorted_values(values));
    }
    // The constraint keywords of the vocabulary (bounds on one value's size, range or form).
    for (k, v) in map.iter().filter(|(k, _)| vocabulary::is_constraint(k)) {
        node.constraints.insert(k.clone(), normalized(v));
    }
    if let Some(Value::Object(props)) = map.get("properties") {
        let required: BTreeSet<&str> = match map.get("required") {
            Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
            _ => BTreeSet::new(),
        };
        for (k, sub) in props {
            let child = describe(root, sub, cx, depth + 1);
            node.props.insert(k.clone(), (child, required.contains(k.as_str())));
        }
    }
    match map.get("items") {
        Some(Value::Array(items)) => {
            node.tuple = items.iter().map(|i| describe(root, i, cx, depth + 1)).collect();
        }
        Some(items @ (Value::Object(_) | Value::Bool(true))) => {
            node.items = Some(Box::new(describe(root, items, cx, depth + 1)));
        }
        _ => {}
    }
    if let Some(Value::Array(items)) = map.get("prefixItems") {
        node.tuple = items.iter().map(|i| describe(root, i, cx, depth + 1)).collect();
    }
    if let Some(values @ Value::Object(_)) = map.get("additionalProperties") {
        node.map_values = Some(Box::new(describe(root, values, cx, depth + 1)));
    }
    if node.types.is_empty() && node.values.is_none() {
        if !node.props.is_empty() || node.map_values.is_some() {
            node.types.insert("object".to_owned());
        } else if node.items.is_some() || !node.tuple.is_empty() {
            node.types.insert("array".to_owned());
        }
    }
    if node.types == BTreeSet::from(["null".to_owned()]) && node.props.is_empty() {
        node.null_only = true;
    }

    if let Some(Value::Array(branches)) = map.get("allOf") {
        for b in branches {
            let branch = describe(root, b, cx, depth + 1);
            node = merge_all(node, branch);
        }
    }
    for keyword in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = map.get(keyword) {
            let branches: Vec<Node> = branches.iter().map(|b| describe(root, b, cx, depth + 1)).collect();
            let union = merge_any(branches);
            node = merge_all(node, union);
        }
    }
    node
}

pub(super) fn local_target<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    vocabulary::resolve_ref(root, reference).map(|(target, _)| target)
}

/// Both must hold (`allOf`, or a node's own keywords next to a union).
pub(super) fn merge_all(mut a: Node, b: Node) -> Node {
    a.types = match (a.types.is_empty(), b.types.is_empty()) {
        (true, _) => b.types,
        (_, true) => a.types,
        _ => {
            let both: BTreeSet<String> = a.types.intersection(&b.types).cloned().collect();
            // `integer` inside `number` is still `integer`.
            let integer_in_number =
                |x: &BTreeSet<String>, y: &BTreeSet<String>| x.contains("number") && y.contains("integer");
            if both.is_empty() && (integer_in_number(&a.types, &b.types) || integer_in_number(&b.types, &a.types)) {
                BTreeSet::from(["integer".to_owned()])
            } else {
                both
            }
        }
    };
    a.values = match (a.values, b.values) {
        (Some(x), Some(y)) => {
            let ys: BTreeSet<String> = y.iter().map(canonical_json).collect();
            Some(x.into_iter().filter(|v| ys.contains(&canonical_json(v))).collect())
        }
        (x, None) => x,
        (None, y) => y,
    };
    a.constraints.extend(b.constraints);
    for (k, (child, required)) in b.props {
        match a.props.remove(&k) {
            Some((existing, was)) => {
                a.props.insert(k, (merge_all(existing, child), was || required));
            }
            None => {
                a.props.insert(k, (child, required));
            }
        }
    }
    a.items = match (a.items, b.items) {
        (Some(x), Some(y)) => Some(Box::new(merge_all(*x, *y))),
        (x, y) => x.or(y),
    };
    if a.tuple.is_empty() {
        a.tuple = b.tuple;
    }
    a.map_values = match (a.map_values, b.map_values) {
        (Some(x), Some(y)) => Some(Box::new(merge_all(*x, *y))),
        (x, y) => x.or(y),
    };
    a.recursive = a.recursive.or(b.recursive);
    a.null_only = a.null_only && b.null_only;
    a
}

/// One of them holds (`anyOf`/`oneOf`): a property is required only if every non-null branch requires it.
pub(super) fn merge_any(branches: Vec<Node>) -> Node {
    let mut out = Node::default();
    let (nulls, branches): (Vec<Node>, Vec<Node>) = branches.into_iter().partition(|b| b.null_only);
    let has_null = !nulls.is_empty();
    if branches.is_empty() {
        return if has_null { Node { types: BTreeSet::from(["null".to_owned()]), ..Node::default() } } else { out };
    }
    let any_type = branches.iter().any(|b| b.types.is_empty() && b.values.is_none() && b.props.is_empty());
    if !any_type {
        out.types = branches.iter().flat_map(|b| b.types.iter().cloned()).collect();
        if has_null {
            out.types.insert("null".to_owned());
        }
    }
    if branches.iter().all(|b| b.values.is_some()) {
        let mut values: Vec<Value> = branches.iter().flat_map(|b| b.values.clone().unwrap_or_default()).collect();
        if has_null {
            values.push(Value::Null);
        }
        out.values = Some(sorted_values(values));
    }
    // Constraints shared by every branch survive.
    if let Some(first) = branches.first() {
        out.constraints = first
            .constraints
            .iter()
            .filter(|(k, v)| branches.iter().all(|b| b.constraints.get(*k) == Some(*v)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
    }
    let with_props: Vec<&Node> = branches.iter().filter(|b| !b.props.is_empty()).collect();
    let names: BTreeSet<String> = with_props.iter().flat_map(|b| b.props.keys().cloned()).collect();
    for name in names {
        let mut merged: Option<Node> = None;
        let mut required = true;
        for b in &with_props {
            match b.props.get(&name) {
                Some((child, r)) => {
                    required &= *r;
                    merged = Some(match merged {
                        None => child.clone(),
                        Some(m) => merge_any(vec![m, child.clone()]),
                    });
                }
                None => required = false,
            }
        }
        if let Some(m) = merged {
            out.props.insert(name, (m, required));
        }
    }
    let items: Vec<Node> = branches.iter().filter_map(|b| b.items.as_deref().cloned()).collect();
    if !items.is_empty() {
        out.items = Some(Box::new(merge_any(items)));
    }
    let maps: Vec<Node> = branches.iter().filter_map(|b| b.map_values.as_deref().cloned()).collect();
    if !maps.is_empty() {
        out.map_values = Some(Box::new(merge_any(maps)));
    }
    out.tuple = branches.iter().find(|b| !b.tuple.is_empty()).map(|b| b.tuple.clone()).unwrap_or_default();
    out.recursive = branches.iter().find_map(|b| b.recursive.clone());
    out
}

pub(super) fn is_plain_key(k: &str) -> bool {
    let mut chars = k.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '-')
}

pub(super) fn child_path(parent: &str, key: &str) -> String {
    let key = if is_plain_key(key) { key.to_owned() } else { format!("[{}]", Value::String(key.to_owned())) };
    match (parent.is_empty(), key.starts_with('[')) {
        (true, _) => key,
        (false, true) => format!("{parent}{key}"),
        (false, false) => format!("{parent}.{key}"),
    }
}

pub(super) fn flatten(node: &Node, path: String, required: bool, out: &mut BTreeMap<String, FieldSummary>) {
    out.insert(
        path.clone(),
        FieldSummary {
            required,
            types: node.types.iter().cloned().collect(),
            values: node.values.clone(),
            constraints: node.constraints.clone(),
            recursive: node.recursive.clone(),
        },
    );
    if node.recursive.is_some() {
        return;
    }
    for (k, (child, r)) in &node.props {
        flatten(child, child_path(&path, k), *r, out);
    }
    if let Some(items) = &node.items {
        flatten(items, format!("{path}[]"), true, out);
    }
    for (i, item) in node.tuple.iter().enumerate() {
        flatten(item, format!("{path}[{i}]"), true, out);
    }
    if let Some(values) = &node.map_values {
        let p = if path.is_empty() { "*".to_owned() } else { format!("{path}.*") };
        flatten(values, p, false, out);
    }
}
