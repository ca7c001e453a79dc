//! Mutations that break a valid instance, and near-miss changes to a tool name.

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Value, json};

use crate::oracle::{MAX_BYTES, json_type};
use crate::tools::HIDDEN;

/// One change to a value, at a location chosen by an index over its nodes (pre-order).
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Remove a key of an object (required or not).
    DropKey(Index),
    /// Add a key to an object (unknown to the schema, unless it happens to be a declared one).
    AddKey(Index, String),
    /// Replace a node with a value of another JSON type.
    Retype(Index, u8),
    /// Wrap a node one level deeper: `[v]` or `{"value": v}`.
    Wrap(Index, bool),
    /// Replace a node with a string larger than the 1 MiB argument limit.
    Huge(Index),
    /// Replace a node with a string of this many characters (around `maxLength` bounds).
    Long(Index, u16),
    /// Replace a node with arrays nested this deep (around the depth limit of 64).
    Deep(Index, u8),
    /// Replace a node with an edge-case number.
    Edge(Index, u8),
    /// Replace a node with `null`.
    Null(Index),
}

pub fn mutation() -> impl Strategy<Value = Mutation> + Clone {
    let key = prop_oneof![
        4 => "[a-z_]{1,10}",
        1 => Just("force".to_owned()),
        1 => Just("__proto__".to_owned()),
        1 => Just("$ref".to_owned()),
        1 => Just(String::new()),
        1 => Just("a/b~c".to_owned()),
    ];
    prop_oneof![
        3 => any::<Index>().prop_map(Mutation::DropKey),
        3 => (any::<Index>(), key).prop_map(|(i, k)| Mutation::AddKey(i, k)),
        4 => (any::<Index>(), any::<u8>()).prop_map(|(i, k)| Mutation::Retype(i, k)),
        2 => (any::<Index>(), any::<bool>()).prop_map(|(i, a)| Mutation::Wrap(i, a)),
        1 => any::<Index>().prop_map(Mutation::Huge),
        2 => (any::<Index>(), 0u16..300).prop_map(|(i, n)| Mutation::Long(i, n)),
        1 => (any::<Index>(), 55u8..75).prop_map(|(i, d)| Mutation::Deep(i, d)),
        3 => (any::<Index>(), any::<u8>()).prop_map(|(i, k)| Mutation::Edge(i, k)),
        2 => any::<Index>().prop_map(Mutation::Null),
    ]
}

#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Pos(usize),
}

/// Paths to the nodes of `v`, pre-order, at most 512.
fn locations(v: &Value) -> Vec<Vec<Step>> {
    let mut out = Vec::new();
    let mut stack = vec![(v, Vec::new())];
    while let Some((node, path)) = stack.pop() {
        if out.len() >= 512 {
            break;
        }
        match node {
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate().rev() {
                    let mut p = path.clone();
                    p.push(Step::Pos(i));
                    stack.push((item, p));
                }
            }
            Value::Object(o) => {
                for (k, item) in o.iter().rev() {
                    let mut p = path.clone();
                    p.push(Step::Key(k.clone()));
                    stack.push((item, p));
                }
            }
            _ => {}
        }
        out.push(path);
    }
    out
}

fn node<'v>(mut v: &'v Value, path: &[Step]) -> &'v Value {
    for step in path {
        v = match (step, v) {
            (Step::Key(k), Value::Object(o)) => &o[k],
            (Step::Pos(i), Value::Array(a)) => &a[*i],
            _ => unreachable!("path from locations"),
        };
    }
    v
}

fn node_mut<'v>(mut v: &'v mut Value, path: &[Step]) -> &'v mut Value {
    for step in path {
        v = match (step, v) {
            (Step::Key(k), Value::Object(o)) => o.get_mut(k).expect("path from locations"),
            (Step::Pos(i), Value::Array(a)) => &mut a[*i],
            _ => unreachable!("path from locations"),
        };
    }
    v
}

fn nested_arrays(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = Value::Array(vec![v]);
    }
    v
}

const EDGE_NUMBERS: [&str; 20] = [
    "-1",
    "0",
    "1",
    "255",
    "256",
    "65535",
    "65536",
    "4294967295",
    "4294967296",
    "-9223372036854775808",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551616.0",
    "0.5",
    "1.0",
    "-0.0",
    "1e300",
    "-1e300",
    "9007199254740993",
    "1000.5",
];

fn edge_number(k: u8) -> Value {
    serde_json::from_str(EDGE_NUMBERS[usize::from(k) % EDGE_NUMBERS.len()]).expect("a JSON number")
}

fn retype(current: &Value, k: u8) -> Value {
    let options = [
        json!(null),
        json!(true),
        json!(0),
        json!(-1),
        json!(0.5),
        json!("s"),
        json!(""),
        json!([]),
        json!({}),
        json!([1]),
        json!({"a": 1}),
    ];
    let start = usize::from(k) % options.len();
    (0..options.len())
        .map(|i| &options[(start + i) % options.len()])
        .find(|o| json_type(o) != json_type(current) || (current.is_number() && o.is_number() && *o != current))
        .cloned()
        .unwrap_or(Value::Null)
}

impl Mutation {
    /// Applies the mutation to `v` (the root is always an object in the harness).
    pub fn apply(&self, v: &mut Value) {
        let locs = locations(v);
        let objects: Vec<&Vec<Step>> = locs.iter().filter(|p| node(v, p).is_object()).collect();
        match self {
            Mutation::DropKey(i) => {
                let with_keys: Vec<&&Vec<Step>> =
                    objects.iter().filter(|p| node(v, p).as_object().is_some_and(|o| !o.is_empty())).collect();
                if with_keys.is_empty() {
                    return;
                }
                let path = with_keys[i.index(with_keys.len())];
                if let Value::Object(o) = node_mut(v, path) {
                    let key = o.keys().nth(i.index(o.len())).cloned().expect("non-empty");
                    o.remove(&key);
                }
            }
            Mutation::AddKey(i, key) => {
                if objects.is_empty() {
                    return;
                }
                let path = objects[i.index(objects.len())].clone();
                if let Value::Object(o) = node_mut(v, &path) {
                    let key = if o.contains_key(key) { format!("{key}_x") } else { key.clone() };
                    o.insert(key, json!(true));
                }
            }
            Mutation::Retype(i, k) => {
                let node = node_mut(v, &locs[i.index(locs.len())]);
                *node = retype(node, *k);
            }
            Mutation::Wrap(i, as_array) => {
                let node = node_mut(v, &locs[i.index(locs.len())]);
                let inner = node.take();
                *node = if *as_array { json!([inner]) } else { json!({ "value": inner }) };
            }
            Mutation::Huge(i) => *node_mut(v, &locs[i.index(locs.len())]) = Value::String("x".repeat(MAX_BYTES + 4096)),
            Mutation::Long(i, n) => {
                *node_mut(v, &locs[i.index(locs.len())]) = Value::String("é".repeat(usize::from(*n)));
            }
            Mutation::Deep(i, d) => *node_mut(v, &locs[i.index(locs.len())]) = nested_arrays(usize::from(*d)),
            Mutation::Edge(i, k) => *node_mut(v, &locs[i.index(locs.len())]) = edge_number(*k),
            Mutation::Null(i) => *node_mut(v, &locs[i.index(locs.len())]) = Value::Null,
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Near-miss names
// ---------------------------------------------------------------------------------------------------------------

/// A change to a tool name that must not reach the tool.
#[derive(Debug, Clone)]
pub enum NameChange {
    Upper(Index),
    Insert(Index, char),
    Delete(Index),
    Homoglyph(Index),
    WireForm,
    Prefix(&'static str),
    Suffix(&'static str),
    Hidden(Index),
    Other(String),
}

pub fn name_change() -> impl Strategy<Value = NameChange> + Clone {
    prop_oneof![
        any::<Index>().prop_map(NameChange::Upper),
        (any::<Index>(), prop::sample::select(vec![' ', '\u{200b}', '\0', '.', '-', '_', '\n', 'x', '\u{feff}']))
            .prop_map(|(i, c)| NameChange::Insert(i, c)),
        any::<Index>().prop_map(NameChange::Delete),
        any::<Index>().prop_map(NameChange::Homoglyph),
        Just(NameChange::WireForm),
        prop::sample::select(vec!["../", "./", "crate::", " ", "functions."]).prop_map(NameChange::Prefix),
        prop::sample::select(vec!["s", " ", "\n", "()", "::call"]).prop_map(NameChange::Suffix),
        any::<Index>().prop_map(NameChange::Hidden),
        any::<String>().prop_map(NameChange::Other),
    ]
}

impl NameChange {
    pub fn apply(&self, name: &str) -> String {
        let chars: Vec<char> = name.chars().collect();
        let at = |i: &Index| i.index(chars.len().max(1));
        match self {
            NameChange::Upper(i) => {
                let mut c = chars.clone();
                if let Some(ch) = c.get_mut(at(i)) {
                    *ch = ch.to_ascii_uppercase();
                }
                c.into_iter().collect()
            }
            NameChange::Insert(i, ch) => {
                let mut c = chars.clone();
                c.insert(at(i).min(c.len()), *ch);
                c.into_iter().collect()
            }
            NameChange::Delete(i) => {
                let mut c = chars.clone();
                if !c.is_empty() {
                    c.remove(at(i));
                }
                c.into_iter().collect()
            }
            NameChange::Homoglyph(i) => {
                let mut c = chars.clone();
                if let Some(ch) = c.get_mut(at(i)) {
                    *ch = match *ch {
                        'a' => 'а',
                        'e' => 'е',
                        'o' => 'ο',
                        'c' => 'с',
                        'i' => 'і',
                        '_' => '＿',
                        '.' => '․',
                        other => other.to_ascii_uppercase(),
                    };
                }
                c.into_iter().collect()
            }
            NameChange::WireForm => name.replace(['.', '_'], "-"),
            NameChange::Prefix(p) => format!("{p}{name}"),
            NameChange::Suffix(s) => format!("{name}{s}"),
            NameChange::Hidden(i) => HIDDEN[i.index(HIDDEN.len())].to_owned(),
            NameChange::Other(s) => s.clone(),
        }
    }
}
