//! Pure JSON Schema transforms shared by the canonicalisation and the provider renderers.
//!
//! Everything here takes a schema by reference or by value and returns a new one; nothing panics on any input,
//! however malformed (non-schema values are copied through unchanged). The walkers know which keywords hold
//! subschemas, so data positions (`enum`, `const`, `default`, `examples`, the names under `properties`) are never
//! mistaken for schemas.
//!
//! * [`close_objects`]: the canonical closing of object schemas (`additionalProperties: false`).
//! * [`inline_refs`]: `$ref` inlining with recursion detection and a size budget.
//! * [`strip_null`], [`accepts_null`]: null-union handling.
//! * [`collapse_literal_union`], [`merge_all_of`], [`fold_keywords`]: simplifications and constraint folding.
//! * [`summarize`]: a short, readable description of a schema, for folded notes.

use std::collections::HashSet;
use std::fmt;

use serde_json::{Map, Value};

use crate::vocabulary::{integer_format_range, is_annotation, is_schema};

/// The deepest subschema nesting the walkers descend into; deeper subtrees are copied unchanged.
pub(crate) use crate::vocabulary::MAX_DEPTH;

/// How many schema nodes `$ref` inlining may copy in total before it stops expanding references. Guards against
/// definitions that reference each other in a way that grows exponentially when inlined.
pub const INLINE_BUDGET: usize = 100_000;

/// The number formats schemars emits for Rust's integer and float widths. They say nothing a model needs (the
/// bounds that matter are in `minimum`/`maximum`), so folding drops them silently.
pub const NUMERIC_FORMATS: &[&str] = &[
    "int", "int8", "int16", "int32", "int64", "int128", "uint", "uint8", "uint16", "uint32", "uint64", "uint128",
    "float", "double",
];

pub(crate) use crate::vocabulary::{Slot, for_each_child, for_each_child_mut, slot};

// ---------------------------------------------------------------------------------------------------------------
// Field paths
// ---------------------------------------------------------------------------------------------------------------

/// Where a subschema sits in the arguments, for messages: `labels`, `items[].name`, `tree.children[]`, `labels.*`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldPath(Vec<String>);

impl FieldPath {
    /// The path of a named definition (`$defs/Node`), for subschemas reached only through `$defs`.
    pub fn definition(name: &str) -> FieldPath {
        FieldPath(vec![format!("$defs/{name}")])
    }

    /// Enters a property.
    pub fn push_field(&mut self, name: &str) {
        self.0.push(format!(".{name}"));
    }

    /// Enters a segment that is not a property: `[]` for array items, `.*` for map values.
    pub fn push_raw(&mut self, segment: &'static str) {
        self.0.push(segment.to_owned());
    }

    /// Leaves the last segment.
    pub fn pop(&mut self) {
        self.0.pop();
    }

    /// Whether this is the top level.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// Enters the segment a child keyword adds, if any; returns whether it pushed.
    pub fn push_for(&mut self, keyword: &str, name: Option<&str>) -> bool {
        match (keyword, name) {
            ("properties", Some(n)) => self.push_field(n),
            ("items" | "prefixItems" | "additionalItems" | "contains" | "unevaluatedItems", _) => self.push_raw("[]"),
            ("additionalProperties" | "patternProperties" | "unevaluatedProperties", _) => self.push_raw(".*"),
            _ => return false,
        }
        true
    }

    /// `field `a.b[]``, or `the top-level arguments object` for the root.
    pub fn subject(&self) -> String {
        if self.is_root() { "the top-level arguments object".to_owned() } else { format!("field `{self}`") }
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            let seg = if i == 0 { seg.strip_prefix('.').unwrap_or(seg) } else { seg };
            f.write_str(seg)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Canonical closing
// ---------------------------------------------------------------------------------------------------------------

/// Whether a schema object says something about which property names are allowed.
fn constrains_properties(map: &Map<String, Value>) -> bool {
    ["properties", "patternProperties", "additionalProperties", "unevaluatedProperties"]
        .iter()
        .any(|k| map.contains_key(*k))
}

/// Whether a schema object pulls in more properties from elsewhere (composition or a reference).
fn spreads(map: &Map<String, Value>) -> bool {
    ["allOf", "anyOf", "oneOf", "$ref", "$dynamicRef", "if", "dependentSchemas", "dependencies"]
        .iter()
        .any(|k| map.contains_key(*k))
}

/// Whether the children under `keyword` of a schema describe the whole instance (`true`) or only a part that the
/// parent or a sibling completes (`false`).
fn child_is_whole(keyword: &str, parent_constrains_properties: bool, parent_whole: bool) -> bool {
    match keyword {
        // Conjunctions and conditionals only ever describe part of the instance.
        "allOf" | "not" | "if" | "then" | "else" | "dependentSchemas" | "dependencies" => false,
        // Alternatives are whole unless the parent itself lists properties (a flattened enum: the parent holds the
        // struct's own fields, each branch the variant's).
        "anyOf" | "oneOf" => parent_whole && !parent_constrains_properties,
        _ => true,
    }
}

/// The `$defs`/`definitions` entry a reference points at: `("$defs", "Name")`.
pub fn definition_of(reference: &str) -> Option<(String, String)> {
    let pointer = local_pointer(reference)?;
    let (container, name) = pointer.strip_prefix('/')?.split_once('/')?;
    if (container == "$defs" || container == "definitions") && !name.contains('/') {
        Some((container.to_owned(), unescape_token(name)))
    } else {
        None
    }
}

/// Collects the definitions that are used as a part of a larger object (from an `allOf` branch, or by a `$ref` that
/// sits next to `properties`). Closing those would reject the properties the other parts add.
fn partial_definitions(root: &Value) -> HashSet<(String, String)> {
    fn walk(schema: &Value, whole: bool, partial: &mut HashSet<(String, String)>, depth: usize) {
        let Value::Object(map) = schema else { return };
        if depth > MAX_DEPTH {
            return;
        }
        let constrains = constrains_properties(map);
        if let Some(Value::String(r)) = map.get("$ref")
            && (!whole || constrains)
            && let Some(def) = definition_of(r)
        {
            partial.insert(def);
        }
        for_each_child(schema, |keyword, name, child| {
            let child_whole = match (keyword, name) {
                ("$defs" | "definitions", Some(n)) => !partial.contains(&(keyword.to_owned(), n.to_owned())),
                _ => child_is_whole(keyword, constrains, whole),
            };
            walk(child, child_whole, partial, depth + 1);
        });
    }
    let mut partial = HashSet::new();
    // Each round can only add definitions; stop when a round adds none.
    loop {
        let before = partial.len();
        walk(root, true, &mut partial, 0);
        if partial.len() == before {
            return partial;
        }
    }
}

/// Closes every object schema: a schema that lists `properties` and says nothing about other properties gets
/// `"additionalProperties": false`, so properties a model invents are rejected instead of silently ignored.
///
/// Two cases keep the object's meaning intact instead:
///
/// * An object whose properties are spread over composition (a struct with a `#[serde(flatten)]`ed enum: its own
///   fields in `properties`, each variant's in a `oneOf` branch) gets `"unevaluatedProperties": false`, which in
///   2020-12 sees the properties the branches accept. Its branches stay open.
/// * A schema that only describes part of an object (an `allOf` branch, a definition used as one) stays open.
///
/// Objects that already say `additionalProperties` or `unevaluatedProperties` (maps, `deny_unknown_fields`, a
/// flattened map) are left as they are.
pub fn close_objects(root: &mut Value) {
    fn walk(schema: &mut Value, whole: bool, partial: &HashSet<(String, String)>, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        let Value::Object(map) = schema else { return };
        // Each child's wholeness depends on the parent as it was before closing.
        let constrains = constrains_properties(map);
        let has_properties = map.get("properties").is_some_and(Value::is_object);
        if whole
            && has_properties
            && !map.contains_key("additionalProperties")
            && !map.contains_key("unevaluatedProperties")
        {
            let keyword = if spreads(map) { "unevaluatedProperties" } else { "additionalProperties" };
            map.insert(keyword.to_owned(), Value::Bool(false));
        }
        for_each_child_mut(schema, |keyword, name, child| {
            let child_whole = match (keyword, name) {
                ("$defs" | "definitions", Some(n)) => !partial.contains(&(keyword.to_owned(), n.to_owned())),
                _ => child_is_whole(keyword, constrains, whole),
            };
            walk(child, child_whole, partial, depth + 1);
        });
    }
    let partial = partial_definitions(root);
    walk(root, true, &partial, 0);
}

/// Adds the range of a fixed-width integer `format` (schemars writes `"format": "uint32"` with `"minimum": 0` but no
/// maximum) as `minimum`/`maximum`, so that out-of-range numbers fail validation with a pointer instead of failing
/// deserialization later, and the model sees the range. Existing bounds are kept.
pub fn bound_integers(root: &mut Value) {
    bound_integer_formats(root, true);
}

/// Like [`bound_integers`], for the 8, 16 and 32-bit formats only: what a renderer that drops `format` adds so
/// that the model still reads the range. The 64-bit ranges are those of every JSON integer serde reads, and would
/// only be noise.
pub fn bound_narrow_integers(root: &mut Value) {
    bound_integer_formats(root, false);
}

fn bound_integer_formats(root: &mut Value, wide: bool) {
    /// The format's range as JSON numbers; the 64-bit ones only when `wide`.
    fn range(format: &str, wide: bool) -> Option<(Value, Value)> {
        let (lo, hi) = integer_format_range(format)?;
        if !wide && hi > i128::from(u32::MAX) {
            return None;
        }
        // Every end lies within `i64::MIN..=u64::MAX`.
        let number = |n: i128| match i64::try_from(n) {
            Ok(i) => Value::from(i),
            Err(_) => u64::try_from(n).map_or(Value::Null, Value::from),
        };
        Some((number(lo), number(hi)))
    }
    fn walk(schema: &mut Value, wide: bool, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        if let Value::Object(map) = schema
            && let Some((min, max)) = map.get("format").and_then(Value::as_str).and_then(|f| range(f, wide))
        {
            map.entry("minimum").or_insert(min);
            map.entry("maximum").or_insert(max);
        }
        for_each_child_mut(schema, |_, _, child| walk(child, wide, depth + 1));
    }
    walk(root, wide, 0);
}

/// Folds every `oneOf` whose branches are all `{"const", "description"?, "title"?, "type"?}` (what schemars emits
/// for an enum with documented variants) into one `enum` of the same values, for validation only: the rendered
/// schemas keep the per-value descriptions. The set of accepted values is unchanged (the consts must be distinct and
/// each branch's `type`, if any, must be the type of its const). The explanation of a violation is the same "one
/// of: ..." or better (for a value of another type than typed branches, the `enum` lists the values where the
/// `oneOf` said "exactly one of N alternatives"; inside an `Option` the `null` is merged into the list), and an
/// `enum` is cheaper to check and far cheaper to explain (no sub-error per branch).
pub fn fold_const_one_of(root: &mut Value) {
    fn type_fits(t: Option<&Value>, v: &Value) -> bool {
        let Some(t) = t else { return true };
        match (t.as_str(), v) {
            (Some("null"), Value::Null) | (Some("boolean"), Value::Bool(_)) | (Some("string"), Value::String(_)) => {
                true
            }
            (Some("number"), Value::Number(_)) => true,
            (Some("integer"), Value::Number(n)) => n.is_i64() || n.is_u64(),
            _ => false,
        }
    }
    fn consts(branches: &[Value]) -> Option<Vec<Value>> {
        let mut values: Vec<Value> = Vec::with_capacity(branches.len());
        for b in branches {
            let b = b.as_object()?;
            if !b.keys().all(|k| matches!(k.as_str(), "const" | "description" | "title" | "type")) {
                return None;
            }
            let value = b.get("const")?;
            if !type_fits(b.get("type"), value) || values.contains(value) {
                return None;
            }
            values.push(value.clone());
        }
        (!values.is_empty()).then_some(values)
    }
    fn walk(schema: &mut Value, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        if let Value::Object(map) = schema
            && !map.contains_key("enum")
            && let Some(values) = map.get("oneOf").and_then(Value::as_array).and_then(|b| consts(b))
        {
            map.shift_remove("oneOf");
            map.insert("enum".to_owned(), Value::Array(values));
        }
        for_each_child_mut(schema, |_, _, child| walk(child, depth + 1));
    }
    walk(root, 0);
}

// ---------------------------------------------------------------------------------------------------------------
// References
// ---------------------------------------------------------------------------------------------------------------

pub(crate) use crate::vocabulary::{local_pointer, resolve};

/// Resolves a JSON pointer (already percent-decoded) in `root`.
pub fn resolve_pointer<'a>(root: &'a Value, pointer: &str) -> Option<&'a Value> {
    root.pointer(pointer)
}

fn unescape_token(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn escape_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// What to put where a reference cannot be inlined (recursion, size budget).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnRecursion {
    /// A plain stand-in (`{"type": "object", "description": "... (recursive: same shape as `tree`)"}`): no
    /// references remain anywhere. For providers that cannot follow references (Ollama).
    Stub,
    /// Keep the `$ref` and emit the definitions it needs under the root's `$defs`, themselves inlined except for
    /// their own recursive references. For providers that understand `$defs`.
    KeepRef,
}

/// Why a reference was left in place (or replaced by a stand-in).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CutKind {
    /// The reference points back at a schema it is inside of.
    Recursive,
    /// The reference is not local, or points nowhere.
    Unresolved,
    /// Inlining would copy more than [`INLINE_BUDGET`] nodes.
    TooLarge,
}

/// A reference that was not inlined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// Why.
    pub kind: CutKind,
    /// Where in the arguments.
    pub path: FieldPath,
    /// The reference as written.
    pub reference: String,
    /// Where the target was first expanded (for recursion), e.g. `tree`; empty for the root.
    pub target_path: Option<FieldPath>,
}

impl Cut {
    /// A sentence for error messages: "field `tree.children[]` is recursive (same shape as `tree`)".
    pub fn describe(&self) -> String {
        match self.kind {
            CutKind::Recursive => {
                let target = match &self.target_path {
                    Some(p) if !p.is_root() => format!("`{p}`"),
                    _ => "the top-level arguments".to_owned(),
                };
                format!("{} is recursive (same shape as {target})", self.path.subject())
            }
            CutKind::Unresolved => {
                format!("{} refers to `{}`, which cannot be resolved", self.path.subject(), self.reference)
            }
            CutKind::TooLarge => format!(
                "{} refers to `{}`, and inlining every reference would exceed {INLINE_BUDGET} schema nodes",
                self.path.subject(),
                self.reference
            ),
        }
    }
}

/// The result of [`inline_refs`].
#[derive(Debug, Clone)]
pub struct Inlined {
    /// The schema with every reference it could inline inlined, and no `$defs`/`definitions` except the ones
    /// [`OnRecursion::KeepRef`] needs.
    pub schema: Value,
    /// The references that were not inlined, in the order they were met.
    pub cuts: Vec<Cut>,
}

/// Inlines every local `$ref` of `root`: the definition takes the reference's place, with the annotations next to
/// the reference (a field's own `description`) taking precedence over the definition's. `$defs` and `definitions`
/// are dropped, except that [`OnRecursion::KeepRef`] re-adds under `$defs` the definitions its kept references
/// need.
///
/// A reference to a schema that is being inlined (a recursive type: `struct Node { children: Vec<Node> }`, or `#`
/// for the root) cannot be inlined; `on_recursion` says what takes its place. The walk terminates on any input:
/// a reference is never expanded inside itself, and expansion stops after [`INLINE_BUDGET`] copied nodes.
pub fn inline_refs(root: &Value, on_recursion: OnRecursion) -> Inlined {
    let mut cx = Inliner {
        root,
        on_recursion,
        budget: INLINE_BUDGET,
        cuts: Vec::new(),
        keep: Vec::new(),
        path: FieldPath::default(),
    };
    let mut stack = vec![Frame { pointer: String::new(), path: FieldPath::default() }];
    let mut schema = cx.inline(root, &mut stack, 0);

    if on_recursion == OnRecursion::KeepRef {
        let mut defs: Vec<(String, String, Value)> = Vec::new();
        let mut next = 0;
        while let Some((container, name)) = cx.keep.get(next).cloned() {
            next += 1;
            let pointer = format!("/{container}/{}", escape_token(&name));
            let Some(target) = resolve_pointer(root, &pointer) else { continue };
            cx.path = FieldPath::definition(&name);
            let mut stack = vec![
                Frame { pointer: String::new(), path: FieldPath::default() },
                Frame { pointer, path: FieldPath::definition(&name) },
            ];
            let inlined = cx.inline(target, &mut stack, 1);
            defs.push((container, name, inlined));
        }
        if let Value::Object(map) = &mut schema {
            for (container, name, def) in defs {
                let entry = map.entry(container).or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(entries) = entry {
                    entries.insert(name, def);
                }
            }
        }
    }
    Inlined { schema, cuts: cx.cuts }
}

struct Frame {
    pointer: String,
    path: FieldPath,
}

struct Inliner<'a> {
    root: &'a Value,
    on_recursion: OnRecursion,
    budget: usize,
    cuts: Vec<Cut>,
    /// Definitions (`container`, `name`) that kept references need, in the order they were first needed.
    keep: Vec<(String, String)>,
    path: FieldPath,
}

impl Inliner<'_> {
    fn inline(&mut self, node: &Value, stack: &mut Vec<Frame>, depth: usize) -> Value {
        let Value::Object(map) = node else { return node.clone() };
        if depth > MAX_DEPTH {
            return node.clone();
        }
        let mut out = Map::new();
        for (keyword, value) in map {
            if keyword == "$defs" || keyword == "definitions" || keyword == "$ref" {
                continue;
            }
            out.insert(keyword.clone(), self.inline_keyword(keyword, value, stack, depth));
        }
        match map.get("$ref") {
            Some(Value::String(reference)) => self.expand(reference, out, stack, depth),
            // No reference, or a malformed one (not a string), which means nothing and is dropped.
            _ => Value::Object(out),
        }
    }

    fn inline_keyword(&mut self, keyword: &str, value: &Value, stack: &mut Vec<Frame>, depth: usize) -> Value {
        match (slot(keyword), value) {
            (Some(Slot::Single), Value::Array(items)) if keyword == "items" => {
                Value::Array(items.iter().map(|c| self.inline_child(keyword, None, c, stack, depth)).collect())
            }
            (Some(Slot::Single), c) => self.inline_child(keyword, None, c, stack, depth),
            (Some(Slot::List), Value::Array(items)) => {
                Value::Array(items.iter().map(|c| self.inline_child(keyword, None, c, stack, depth)).collect())
            }
            (Some(Slot::Named), Value::Object(entries)) => Value::Object(
                entries
                    .iter()
                    .map(|(name, c)| (name.clone(), self.inline_child(keyword, Some(name), c, stack, depth)))
                    .collect(),
            ),
            _ => value.clone(),
        }
    }

    fn inline_child(
        &mut self,
        keyword: &str,
        name: Option<&str>,
        child: &Value,
        stack: &mut Vec<Frame>,
        depth: usize,
    ) -> Value {
        if !is_schema(child) {
            return child.clone();
        }
        let pushed = self.path.push_for(keyword, name);
        let out = self.inline(child, stack, depth + 1);
        if pushed {
            self.path.pop();
        }
        out
    }

    /// Replaces a reference (whose sibling keywords, already inlined, are `siblings`) by its target.
    fn expand(&mut self, reference: &str, siblings: Map<String, Value>, stack: &mut Vec<Frame>, depth: usize) -> Value {
        let Some(pointer) = local_pointer(reference) else {
            return self.unresolved(reference, siblings);
        };
        let Some(target) = resolve_pointer(self.root, &pointer) else {
            return self.unresolved(reference, siblings);
        };
        if let Some(frame) = stack.iter().find(|f| f.pointer == pointer) {
            let target_path = frame.path.clone();
            self.cuts.push(Cut {
                kind: CutKind::Recursive,
                path: self.path.clone(),
                reference: reference.to_owned(),
                target_path: Some(target_path.clone()),
            });
            return self.stand_in(reference, &pointer, target, siblings, &target_path);
        }
        let cost = count_nodes(target, self.budget.saturating_add(1));
        if cost > self.budget {
            self.cuts.push(Cut {
                kind: CutKind::TooLarge,
                path: self.path.clone(),
                reference: reference.to_owned(),
                target_path: None,
            });
            let here = self.path.clone();
            return self.stand_in(reference, &pointer, target, siblings, &here);
        }
        self.budget -= cost;
        stack.push(Frame { pointer, path: self.path.clone() });
        let mut expanded = self.inline(target, stack, depth + 1);
        stack.pop();
        // A copy is no target of references: its anchors would name several places once it is used twice.
        if let Value::Object(map) = &mut expanded {
            map.shift_remove("$anchor");
            map.shift_remove("$dynamicAnchor");
        }
        merge_ref(expanded, siblings)
    }

    fn unresolved(&mut self, reference: &str, siblings: Map<String, Value>) -> Value {
        self.cuts.push(Cut {
            kind: CutKind::Unresolved,
            path: self.path.clone(),
            reference: reference.to_owned(),
            target_path: None,
        });
        Value::Object(siblings)
    }

    /// What replaces a reference that is not inlined: the kept reference, or a stub.
    fn stand_in(
        &mut self,
        reference: &str,
        pointer: &str,
        target: &Value,
        mut siblings: Map<String, Value>,
        target_path: &FieldPath,
    ) -> Value {
        if self.on_recursion == OnRecursion::KeepRef {
            let keepable = if pointer.is_empty() {
                true
            } else if let Some(def) = definition_of(reference) {
                if !self.keep.contains(&def) {
                    self.keep.push(def);
                }
                true
            } else {
                false
            };
            if keepable {
                let reference = if pointer.is_empty() {
                    "#".to_owned()
                } else {
                    let (container, name) = definition_of(reference).unwrap_or_default();
                    format!("#/{container}/{}", escape_token(&name))
                };
                siblings.insert("$ref".to_owned(), Value::String(reference));
                return Value::Object(siblings);
            }
        }
        stub(target, siblings, target_path)
    }
}

/// A stand-in for a schema that cannot be inlined: its type, and a description saying where its shape is.
fn stub(target: &Value, mut siblings: Map<String, Value>, target_path: &FieldPath) -> Value {
    let mut out = Map::new();
    match target.get("type") {
        Some(Value::String(t)) => {
            out.insert("type".to_owned(), Value::String(t.clone()));
        }
        _ if target.get("properties").is_some() => {
            out.insert("type".to_owned(), Value::String("object".to_owned()));
        }
        _ => {}
    }
    let shape = if target_path.is_root() { "the top-level arguments".to_owned() } else { format!("`{target_path}`") };
    let base = siblings.shift_remove("description").or_else(|| target.get("description").cloned());
    let note = format!("Recursive: same shape as {shape}.");
    let description = match base.as_ref().and_then(Value::as_str) {
        Some(d) if !d.trim().is_empty() => format!("{} {note}", with_period(d)),
        _ => note,
    };
    out.insert("description".to_owned(), Value::String(description));
    Value::Object(out)
}

/// Merges an inlined reference target with the keywords next to the reference. Annotations next to the reference
/// win (a field's doc comment over its type's); validation keywords that disagree with the target's are kept
/// side by side in an `allOf`, so the meaning does not change.
fn merge_ref(target: Value, siblings: Map<String, Value>) -> Value {
    if siblings.is_empty() {
        return target;
    }
    match target {
        Value::Object(mut t) => {
            let mut conflicts = Map::new();
            for (k, v) in siblings {
                let agrees = t.get(&k).is_none_or(|existing| *existing == v);
                if agrees || is_annotation(&k) {
                    t.insert(k, v);
                } else {
                    conflicts.insert(k, v);
                }
            }
            if conflicts.is_empty() {
                Value::Object(t)
            } else {
                let mut out = Map::new();
                let annotations: Vec<String> = t.keys().filter(|k| is_annotation(k)).cloned().collect();
                for k in annotations {
                    if let Some(v) = t.shift_remove(&k) {
                        out.insert(k, v);
                    }
                }
                out.insert("allOf".to_owned(), Value::Array(vec![Value::Object(t), Value::Object(conflicts)]));
                Value::Object(out)
            }
        }
        Value::Bool(true) => Value::Object(siblings),
        other => {
            let mut out = Map::new();
            out.insert("allOf".to_owned(), Value::Array(vec![other, Value::Object(siblings)]));
            Value::Object(out)
        }
    }
}

/// The number of JSON nodes in `v`, counting at most up to `limit`.
fn count_nodes(v: &Value, limit: usize) -> usize {
    let mut count = 0;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        count += 1;
        if count >= limit {
            return count;
        }
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    count
}

/// The canonical schema for providers that take JSON Schema as it is (Anthropic, Gemini): references inlined
/// (recursive definitions stay under `$defs`), without `$schema`.
pub fn inline_for_json_schema(canonical: &Value) -> Value {
    let mut schema = inline_refs(canonical, OnRecursion::KeepRef).schema;
    if let Value::Object(map) = &mut schema {
        map.shift_remove("$schema");
    }
    schema
}

/// Whether `schema` contains a `$ref` anywhere (in a schema position).
#[cfg(test)]
pub fn has_ref(schema: &Value) -> bool {
    fn walk(schema: &Value, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        if schema.get("$ref").is_some() {
            return true;
        }
        let mut found = false;
        for_each_child(schema, |_, _, c| found = found || walk(c, depth + 1));
        found
    }
    walk(schema, 0)
}

// ---------------------------------------------------------------------------------------------------------------
// Null unions
// ---------------------------------------------------------------------------------------------------------------

/// Whether `v` is a schema that accepts only `null` (`{"type": "null"}`, `{"const": null}`, `{"enum": [null]}`),
/// annotations aside.
pub fn is_null_only(v: &Value) -> bool {
    let Value::Object(map) = v else { return false };
    let null_type = map.get("type").and_then(Value::as_str) == Some("null");
    let null_const = map.get("const") == Some(&Value::Null);
    let null_enum = map.get("enum").and_then(Value::as_array).is_some_and(|e| e.len() == 1 && e[0].is_null());
    let others = map.keys().all(|k| is_annotation(k) || k == "type" || k == "const" || k == "enum");
    (null_type || null_const || null_enum) && others
}

/// Whether `schema` accepts `null` (its `type`, `const`, `enum`, `anyOf`/`oneOf`/`allOf` branches allow it),
/// following references in `root`. A schema that restricts none of these (`{}`, or only object keywords) accepts
/// `null`. A schema with `not` is conservatively taken not to.
pub fn accepts_null(root: &Value, schema: &Value) -> bool {
    fn walk(root: &Value, schema: &Value, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        let schema = resolve(root, schema);
        let map = match schema {
            Value::Bool(b) => return *b,
            Value::Object(map) => map,
            _ => return false,
        };
        let type_ok = match map.get("type") {
            None => true,
            Some(Value::String(t)) => t == "null",
            Some(Value::Array(ts)) => ts.iter().any(|t| t == "null"),
            Some(_) => false,
        };
        let enum_ok = match map.get("enum") {
            None => true,
            Some(Value::Array(values)) => values.iter().any(Value::is_null),
            Some(_) => false,
        };
        let const_ok = map.get("const").is_none_or(Value::is_null);
        let union_ok = ["anyOf", "oneOf"].iter().all(|k| match map.get(*k) {
            Some(Value::Array(branches)) => branches.iter().any(|b| walk(root, b, depth + 1)),
            _ => true,
        });
        let all_ok = match map.get("allOf") {
            Some(Value::Array(branches)) => branches.iter().all(|b| walk(root, b, depth + 1)),
            _ => true,
        };
        // Keywords about objects, arrays, strings or numbers do not apply to `null`: `{}` accepts it.
        type_ok && enum_ok && const_ok && union_ok && all_ok && !map.contains_key("not")
    }
    walk(root, schema, 0)
}

/// Removes the `null` alternative from an optional value's schema, at this level only:
///
/// * `"type": ["integer", "null"]` becomes `"type": "integer"`;
/// * `anyOf`/`oneOf` `[X, {"type": "null"}]` becomes `X`, merged with the keywords next to the union (whose
///   `description`, the field's own doc comment, wins over `X`'s);
/// * `null` leaves `enum`.
///
/// A schema that accepts only `null` is left as it is.
pub fn strip_null(map: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = map.get_mut("type")
        && types.iter().any(|t| t != "null")
    {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            map.insert("type".to_owned(), only);
        }
    }
    if let Some(Value::Array(values)) = map.get_mut("enum")
        && values.iter().any(|v| !v.is_null())
    {
        values.retain(|v| !v.is_null());
    }
    for keyword in ["anyOf", "oneOf"] {
        let Some(Value::Array(branches)) = map.get(keyword) else { continue };
        if !branches.iter().any(is_null_only) || branches.iter().all(is_null_only) {
            continue;
        }
        let Some(Value::Array(branches)) = map.shift_remove(keyword) else { continue };
        let mut rest: Vec<Value> = branches.into_iter().filter(|b| !is_null_only(b)).collect();
        if rest.len() == 1 {
            let branch = rest.remove(0);
            match branch {
                Value::Object(b) => {
                    for (k, v) in b {
                        if !map.contains_key(&k) {
                            map.insert(k, v);
                        }
                    }
                    // The branch may itself be nullable (`Option<Option<T>>`).
                    strip_null(map);
                }
                other => {
                    map.insert(keyword.to_owned(), Value::Array(vec![other]));
                }
            }
        } else {
            map.insert(keyword.to_owned(), Value::Array(rest));
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Simplifications
// ---------------------------------------------------------------------------------------------------------------

/// The values one literal branch (`{"const": v}` or `{"enum": [...]}`, with annotations) stands for.
fn literal_values(branch: &Value) -> Option<Vec<Value>> {
    let Value::Object(map) = branch else { return None };
    let allowed = |k: &str| is_annotation(k) || k == "type" || k == "const" || k == "enum";
    if !map.keys().all(|k| allowed(k)) {
        return None;
    }
    match (map.get("const"), map.get("enum")) {
        (Some(c), None) => Some(vec![c.clone()]),
        (None, Some(Value::Array(values))) if !values.is_empty() => Some(values.clone()),
        _ => None,
    }
}

/// A union (`anyOf`/`oneOf`) of literals only (a unit enum: schemars emits `oneOf` of `const`s when the variants
/// have doc comments) becomes one `enum` with a `type`. Returns each value with its branch's description, or
/// `None` if the schema has no such union.
pub fn collapse_literal_union(map: &mut Map<String, Value>) -> Option<Vec<(Value, Option<String>)>> {
    let keyword = ["oneOf", "anyOf"].into_iter().find(|k| {
        map.get(*k)
            .and_then(Value::as_array)
            .is_some_and(|bs| !bs.is_empty() && bs.iter().all(|b| literal_values(b).is_some()))
    })?;
    if map.contains_key("enum") || map.contains_key("const") {
        return None;
    }
    let Some(Value::Array(branches)) = map.shift_remove(keyword) else { return None };
    let mut values = Vec::new();
    let mut docs = Vec::new();
    for branch in &branches {
        let description = branch.get("description").and_then(Value::as_str).map(str::to_owned);
        for v in literal_values(branch).unwrap_or_default() {
            if !values.contains(&v) {
                docs.push((v.clone(), description.clone()));
                values.push(v);
            }
        }
    }
    let mut types: Vec<&str> = Vec::new();
    for v in &values {
        let t = crate::vocabulary::instance_type(v);
        if !types.contains(&t) {
            types.push(t);
        }
    }
    if types == ["integer", "number"] || types == ["number", "integer"] {
        types = vec!["number"];
    }
    if !map.contains_key("type") {
        match types.as_slice() {
            [one] => {
                map.insert("type".to_owned(), Value::String((*one).to_owned()));
            }
            many if !many.is_empty() => {
                map.insert(
                    "type".to_owned(),
                    Value::Array(many.iter().map(|t| Value::String((*t).to_owned())).collect()),
                );
            }
            _ => {}
        }
    }
    map.insert("enum".to_owned(), Value::Array(values));
    Some(docs)
}

/// The note listing documented enum values: `Values: "low" = Lowest; "high" = Highest.` `None` when no value has
/// documentation (the `enum` says it all).
pub fn values_note(docs: &[(Value, Option<String>)]) -> Option<String> {
    if docs.iter().all(|(_, d)| d.as_deref().is_none_or(|d| d.trim().is_empty())) {
        return None;
    }
    let parts: Vec<String> = docs
        .iter()
        .map(|(v, d)| match d.as_deref().map(str::trim) {
            Some(d) if !d.is_empty() => format!("{} = {}", short_json(v), d.trim_end_matches('.')),
            _ => short_json(v),
        })
        .collect();
    Some(format!("Values: {}.", parts.join("; ")))
}

/// A unit enum as one `enum` ([`collapse_literal_union`]), its values' doc comments as a note
/// ([`values_note`]): what the renderers send to providers that take no `oneOf` of `const`s (Ollama, Gemini).
/// Returns the note, for the caller to put into the description; `None` when nothing had documentation or there
/// was no such union.
pub fn collapse_documented_enum(map: &mut Map<String, Value>) -> Option<String> {
    collapse_literal_union(map).and_then(|docs| values_note(&docs))
}

/// Merges the branches of an `allOf` into the schema itself where that is exact (no keyword disagrees; properties
/// and `required` are unioned). Returns `true` when no `allOf` remains; otherwise the branches that could not be
/// merged stay in `allOf`.
pub fn merge_all_of(map: &mut Map<String, Value>) -> bool {
    merge_all_of_at(map, 0)
}

fn merge_all_of_at(map: &mut Map<String, Value>, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return !map.contains_key("allOf");
    }
    let Some(Value::Array(branches)) = map.shift_remove("allOf") else {
        return !map.contains_key("allOf");
    };
    let mut rest = Vec::new();
    for branch in branches {
        match branch {
            Value::Object(b) => {
                if let Err(b) = merge_conjunct(map, b, depth) {
                    rest.push(Value::Object(b));
                }
            }
            Value::Bool(true) => {}
            other => rest.push(other),
        }
    }
    if rest.is_empty() {
        true
    } else {
        map.insert("allOf".to_owned(), Value::Array(rest));
        false
    }
}

/// Merges `src` into `dst` if no keyword disagrees; gives `src` back otherwise.
fn merge_conjunct(
    dst: &mut Map<String, Value>,
    mut src: Map<String, Value>,
    depth: usize,
) -> Result<(), Map<String, Value>> {
    // A nested allOf merges first, so its keywords can be compared.
    if !merge_all_of_at(&mut src, depth + 1) {
        return Err(src);
    }
    for (k, v) in &src {
        let Some(existing) = dst.get(k) else { continue };
        let fine = match k.as_str() {
            "properties" => match (existing, v) {
                (Value::Object(a), Value::Object(b)) => b.iter().all(|(name, s)| a.get(name).is_none_or(|t| t == s)),
                _ => false,
            },
            "required" => existing.is_array() && v.is_array(),
            k if is_annotation(k) => true,
            _ => existing == v,
        };
        if !fine {
            return Err(src);
        }
    }
    for (k, v) in src {
        match (k.as_str(), dst.get_mut(&k), v) {
            ("properties", Some(Value::Object(a)), Value::Object(b)) => {
                for (name, s) in b {
                    a.entry(name).or_insert(s);
                }
            }
            ("required", Some(Value::Array(a)), Value::Array(b)) => {
                for name in b {
                    if !a.contains(&name) {
                        a.push(name);
                    }
                }
            }
            (_, Some(_), _) => {}
            (_, None, v) => {
                dst.insert(k, v);
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------------
// Constraint folding
// ---------------------------------------------------------------------------------------------------------------

/// Removes each of `keywords` from the schema and returns a short readable note for each, in `keywords` order:
/// `Format: date-time.`, `Minimum: 0.`, `Pattern: ^INC-[0-9]+$.`, `Default: 10.` Formats that only name a Rust
/// number width (`int32`, `uint8`, `double`, ...) are removed without a note. Keywords not understood here are
/// removed with a generic note.
pub fn fold_keywords(map: &mut Map<String, Value>, keywords: &[&str]) -> Vec<String> {
    let mut notes = Vec::new();
    for keyword in keywords {
        let Some(value) = map.shift_remove(*keyword) else { continue };
        // `minItems == maxItems` reads better as one note.
        if *keyword == "minItems" && keywords.contains(&"maxItems") && map.get("maxItems") == Some(&value) {
            map.shift_remove("maxItems");
            notes.push(format!("Exactly {} items.", short_json(&value)));
            continue;
        }
        if let Some(note) = note_for(keyword, &value) {
            notes.push(note);
        }
    }
    notes
}

fn note_for(keyword: &str, value: &Value) -> Option<String> {
    let text = || match value {
        Value::String(s) => s.clone(),
        other => short_json(other),
    };
    let note = match keyword {
        "format" => {
            if value.as_str().is_some_and(|f| NUMERIC_FORMATS.contains(&f)) {
                return None;
            }
            format!("Format: {}.", text())
        }
        "pattern" => format!("Pattern: {}.", text()),
        "minimum" => format!("Minimum: {}.", text()),
        "maximum" => format!("Maximum: {}.", text()),
        "exclusiveMinimum" => format!("Greater than {}.", text()),
        "exclusiveMaximum" => format!("Less than {}.", text()),
        "multipleOf" => format!("Multiple of {}.", text()),
        "minLength" => format!("Minimum length: {}.", text()),
        "maxLength" => format!("Maximum length: {}.", text()),
        "minItems" => format!("Minimum items: {}.", text()),
        "maxItems" => format!("Maximum items: {}.", text()),
        "uniqueItems" => {
            if value != &Value::Bool(true) {
                return None;
            }
            "Items must be unique.".to_owned()
        }
        "minProperties" => format!("Minimum entries: {}.", text()),
        "maxProperties" => format!("Maximum entries: {}.", text()),
        "default" => format!("Default: {}.", short_json(value)),
        "const" => format!("Must be {}.", short_json(value)),
        "examples" => {
            let first = value.as_array().and_then(|a| a.first()).unwrap_or(value);
            format!("Example: {}.", short_json(first))
        }
        "deprecated" => {
            if value != &Value::Bool(true) {
                return None;
            }
            "Deprecated.".to_owned()
        }
        "contentEncoding" => format!("Encoding: {}.", text()),
        "contentMediaType" => format!("Media type: {}.", text()),
        _ => return None,
    };
    Some(note)
}

/// Appends notes to the schema's `description` (creating it if needed), one sentence each.
pub fn append_notes(map: &mut Map<String, Value>, notes: &[String]) {
    if notes.is_empty() {
        return;
    }
    let joined = notes.join(" ");
    let description = match map.get("description").and_then(Value::as_str).map(str::trim) {
        Some(d) if !d.is_empty() => format!("{} {joined}", with_period(d)),
        _ => joined,
    };
    map.insert("description".to_owned(), Value::String(description));
}

/// `text`, trimmed, ending in sentence punctuation.
pub fn with_period(text: &str) -> String {
    let t = text.trim();
    if t.ends_with(['.', '!', '?', ':', ';']) { t.to_owned() } else { format!("{t}.") }
}

/// Compact JSON of `v`, shortened to about 80 characters.
pub fn short_json(v: &Value) -> String {
    const MAX: usize = 80;
    let s = v.to_string();
    if s.chars().count() <= MAX {
        s
    } else {
        let mut cut: String = s.chars().take(MAX).collect();
        cut.push('…');
        cut
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Summaries
// ---------------------------------------------------------------------------------------------------------------

/// A short readable description of what `schema` accepts, for notes: `string`, `integer`, `array of string`,
/// `object {street, zip?}`, `"low" | "high"`, `map of integer`.
pub fn summarize(schema: &Value) -> String {
    fn walk(schema: &Value, depth: usize) -> String {
        let map = match schema {
            Value::Bool(true) => return "any value".to_owned(),
            Value::Bool(false) => return "nothing".to_owned(),
            Value::Object(map) => map,
            _ => return "any value".to_owned(),
        };
        if depth > 3 {
            return "…".to_owned();
        }
        if let Some(c) = map.get("const") {
            return short_json(c);
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            let shown: Vec<String> = values.iter().take(8).map(short_json).collect();
            let more = if values.len() > 8 { " | …" } else { "" };
            return format!("{}{more}", shown.join(" | "));
        }
        for keyword in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = map.get(keyword) {
                let parts: Vec<String> = branches.iter().map(|b| walk(b, depth + 1)).collect();
                return parts.join(" | ");
            }
        }
        let types: Vec<&str> = match map.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ if map.contains_key("properties") => vec!["object"],
            _ if map.contains_key("items") => vec!["array"],
            _ => vec![],
        };
        if types.is_empty() {
            return "any value".to_owned();
        }
        let parts: Vec<String> = types.iter().map(|t| summarize_type(map, t, depth)).collect();
        parts.join(" or ")
    }

    fn summarize_type(map: &Map<String, Value>, t: &str, depth: usize) -> String {
        match t {
            "object" => {
                if let Some(Value::Object(props)) = map.get("properties") {
                    let required: Vec<&str> = map
                        .get("required")
                        .and_then(Value::as_array)
                        .map(|r| r.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    let fields: Vec<String> = props
                        .iter()
                        .map(|(name, s)| {
                            let fixed = s.get("const").or_else(|| {
                                s.get("enum").and_then(Value::as_array).filter(|e| e.len() == 1).and_then(|e| e.first())
                            });
                            match fixed {
                                Some(v) => format!("{name}: {}", short_json(v)),
                                None if required.contains(&name.as_str()) => name.clone(),
                                None => format!("{name}?"),
                            }
                        })
                        .collect();
                    format!("object {{{}}}", fields.join(", "))
                } else if let Some(values) = map.get("additionalProperties").filter(|v| v.is_object()) {
                    format!("map of {}", walk(values, depth + 1))
                } else {
                    "object".to_owned()
                }
            }
            "array" => match map.get("items") {
                Some(items) if items.is_object() => format!("array of {}", walk(items, depth + 1)),
                _ => "array".to_owned(),
            },
            "string" => match map.get("format").and_then(Value::as_str) {
                Some(f) if !NUMERIC_FORMATS.contains(&f) => format!("string ({f})"),
                _ => "string".to_owned(),
            },
            other => other.to_owned(),
        }
    }

    walk(schema, 0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn closes_plain_objects_and_leaves_maps() {
        let mut s = json!({
            "type": "object",
            "properties": {
                "a": {"type": "object", "properties": {"x": {"type": "string"}}},
                "m": {"type": "object", "additionalProperties": {"type": "string"}},
                "d": {"type": "object", "properties": {"default": {"type": "object", "properties": {}}}}
            },
            "default": {"properties": {"not": "a schema"}}
        });
        close_objects(&mut s);
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(s["properties"]["a"]["additionalProperties"], false);
        assert_eq!(s["properties"]["m"]["additionalProperties"], json!({"type": "string"}));
        assert_eq!(s["properties"]["d"]["properties"]["default"]["additionalProperties"], false);
        // Data positions are not schemas.
        assert!(s["default"].get("additionalProperties").is_none());
    }

    #[test]
    fn integer_formats_become_bounds_and_the_narrow_form_leaves_out_64_bits() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "integer", "format": "uint8"},
            "b": {"type": "integer", "format": "int64"},
            "c": {"type": "integer", "format": "uint64", "minimum": 1},
            "d": {"type": "integer", "format": "int32", "maximum": 9},
        }});
        let mut wide = schema.clone();
        bound_integers(&mut wide);
        let bounds =
            |s: &Value, p: &str| (s["properties"][p]["minimum"].clone(), s["properties"][p]["maximum"].clone());
        assert_eq!(bounds(&wide, "a"), (json!(0), json!(255)));
        assert_eq!(bounds(&wide, "b"), (json!(i64::MIN), json!(i64::MAX)));
        assert_eq!(bounds(&wide, "c"), (json!(1), json!(u64::MAX)));
        assert_eq!(bounds(&wide, "d"), (json!(i32::MIN), json!(9)));
        let mut narrow = schema;
        bound_narrow_integers(&mut narrow);
        assert_eq!(bounds(&narrow, "a"), (json!(0), json!(255)));
        assert_eq!(bounds(&narrow, "b"), (Value::Null, Value::Null));
        assert_eq!(bounds(&narrow, "c"), (json!(1), Value::Null));
        assert_eq!(bounds(&narrow, "d"), (json!(i32::MIN), json!(9)));
    }

    #[test]
    fn flattened_enum_uses_unevaluated_properties_and_branches_stay_open() {
        let mut s = json!({
            "type": "object",
            "properties": {"top": {"type": "string"}},
            "oneOf": [
                {"type": "object", "properties": {"kind": {"const": "a"}}},
                {"type": "object", "properties": {"kind": {"const": "b"}, "x": {"type": "integer"}}}
            ]
        });
        close_objects(&mut s);
        assert_eq!(s["unevaluatedProperties"], false);
        assert!(s.get("additionalProperties").is_none());
        assert!(s["oneOf"][0].get("additionalProperties").is_none());
        assert!(s["oneOf"][1].get("additionalProperties").is_none());
    }

    #[test]
    fn definitions_used_in_all_of_stay_open() {
        let mut s = json!({
            "type": "object",
            "allOf": [{"$ref": "#/$defs/Base"}],
            "properties": {"extra": {"type": "string"}, "whole": {"$ref": "#/$defs/Other"}},
            "$defs": {
                "Base": {"type": "object", "properties": {"id": {"type": "string"}}},
                "Other": {"type": "object", "properties": {"id": {"type": "string"}}}
            }
        });
        close_objects(&mut s);
        assert!(s["$defs"]["Base"].get("additionalProperties").is_none());
        assert_eq!(s["$defs"]["Other"]["additionalProperties"], false);
        assert_eq!(s["unevaluatedProperties"], false);
    }

    #[test]
    fn inlining_terminates_on_mutual_and_root_recursion() {
        let s = json!({
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/A"}, "self": {"$ref": "#"}},
            "$defs": {
                "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
                "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}
            }
        });
        let stub = inline_refs(&s, OnRecursion::Stub);
        assert!(!has_ref(&stub.schema));
        assert_eq!(stub.cuts.len(), 2);
        assert!(stub.cuts.iter().all(|c| c.kind == CutKind::Recursive));
        let d = stub.schema["properties"]["a"]["properties"]["b"]["properties"]["a"]["description"].as_str();
        assert_eq!(d, Some("Recursive: same shape as `a`."));

        let kept = inline_refs(&s, OnRecursion::KeepRef);
        assert_eq!(kept.schema["properties"]["self"]["$ref"], "#");
        assert_eq!(kept.schema["properties"]["a"]["properties"]["b"]["properties"]["a"]["$ref"], "#/$defs/A");
        assert!(kept.schema["$defs"]["A"].is_object());
        assert!(kept.schema["$defs"].get("B").is_none());
    }

    #[test]
    fn inlined_copies_carry_no_anchors() {
        let s = json!({
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/Id"}, "b": {"$ref": "#/$defs/Id"}},
            "$defs": {"Id": {"$anchor": "id", "$dynamicAnchor": "id", "type": "string"}}
        });
        for on_recursion in [OnRecursion::Stub, OnRecursion::KeepRef] {
            let out = inline_refs(&s, on_recursion).schema;
            assert_eq!(out["properties"]["a"], json!({"type": "string"}));
            assert_eq!(out["properties"]["b"], json!({"type": "string"}));
        }
    }

    #[test]
    fn unresolved_and_malformed_references_do_not_panic() {
        let s = json!({
            "type": "object",
            "properties": {
                "x": {"$ref": "https://example.com/s.json", "description": "remote"},
                "y": {"$ref": "#/$defs/Missing"},
                "z": {"$ref": 7},
                "w": {"$ref": "#anchor"}
            }
        });
        let out = inline_refs(&s, OnRecursion::Stub);
        assert!(!has_ref(&out.schema));
        assert_eq!(out.cuts.iter().filter(|c| c.kind == CutKind::Unresolved).count(), 3);
        assert_eq!(out.schema["properties"]["x"]["description"], "remote");
        for junk in [json!(null), json!(3), json!("s"), json!([1, {"$ref": "#"}]), json!(true)] {
            let _ = inline_refs(&junk, OnRecursion::KeepRef);
            let mut j = junk.clone();
            close_objects(&mut j);
            let _ = summarize(&junk);
        }
    }

    #[test]
    fn exponential_definitions_hit_the_budget() {
        // D0 references D1 twice, D1 references D2 twice, ...: 2^30 copies if fully inlined.
        let mut defs = Map::new();
        for i in 0..30 {
            defs.insert(
                format!("D{i}"),
                json!({"type": "object", "properties": {
                    "l": {"$ref": format!("#/$defs/D{}", i + 1)},
                    "r": {"$ref": format!("#/$defs/D{}", i + 1)}
                }}),
            );
        }
        defs.insert("D30".into(), json!({"type": "string"}));
        let s = json!({"type": "object", "properties": {"root": {"$ref": "#/$defs/D0"}}, "$defs": defs});
        let out = inline_refs(&s, OnRecursion::Stub);
        assert!(out.cuts.iter().any(|c| c.kind == CutKind::TooLarge));
        assert!(!has_ref(&out.schema));
        let kept = inline_refs(&s, OnRecursion::KeepRef);
        assert!(kept.cuts.iter().any(|c| c.kind == CutKind::TooLarge));
    }

    #[test]
    fn reference_siblings_win_for_annotations_and_conflicts_become_all_of() {
        let s = json!({
            "properties": {
                "a": {"$ref": "#/$defs/T", "description": "field doc"},
                "b": {"$ref": "#/$defs/T", "type": "integer"}
            },
            "$defs": {"T": {"type": "string", "description": "type doc"}}
        });
        let out = inline_refs(&s, OnRecursion::Stub).schema;
        assert_eq!(out["properties"]["a"], json!({"type": "string", "description": "field doc"}));
        assert!(out["properties"]["b"]["allOf"].is_array());
    }

    #[test]
    fn strips_null_alternatives() {
        let mut m = json!({"type": ["integer", "null"], "format": "uint32"}).as_object().cloned().unwrap_or_default();
        strip_null(&mut m);
        assert_eq!(m["type"], "integer");
        let mut m =
            json!({"anyOf": [{"type": "object", "description": "inner"}, {"type": "null"}], "description": "outer"})
                .as_object()
                .cloned()
                .unwrap_or_default();
        strip_null(&mut m);
        assert_eq!(Value::Object(m), json!({"type": "object", "description": "outer"}));
        let mut m = json!({"type": "null"}).as_object().cloned().unwrap_or_default();
        strip_null(&mut m);
        assert_eq!(m["type"], "null");
    }

    #[test]
    fn accepts_null_follows_references() {
        let root = json!({"$defs": {"N": {"type": ["string", "null"]}, "S": {"type": "string"}}});
        assert!(accepts_null(&root, &json!({"$ref": "#/$defs/N"})));
        assert!(!accepts_null(&root, &json!({"$ref": "#/$defs/S"})));
        assert!(accepts_null(&root, &json!({"anyOf": [{"$ref": "#/$defs/S"}, {"type": "null"}]})));
        assert!(accepts_null(&root, &json!({})));
        assert!(accepts_null(&root, &json!({"properties": {"a": {"type": "string"}}})));
        assert!(!accepts_null(&root, &json!({"type": "object"})));
        assert!(!accepts_null(&root, &json!({"enum": ["a"]})));
        assert!(accepts_null(&root, &json!(true)));
    }

    #[test]
    fn folds_constraints_into_notes() {
        let mut m = json!({"type": "integer", "format": "uint8", "minimum": 0, "maximum": 255, "default": 3})
            .as_object()
            .cloned()
            .unwrap_or_default();
        let notes = fold_keywords(&mut m, &["format", "minimum", "maximum", "default"]);
        assert_eq!(notes, ["Minimum: 0.", "Maximum: 255.", "Default: 3."]);
        append_notes(&mut m, &notes);
        assert_eq!(m["description"], "Minimum: 0. Maximum: 255. Default: 3.");
        let mut m = json!({"description": "When", "format": "date-time", "minItems": 2, "maxItems": 2})
            .as_object()
            .cloned()
            .unwrap_or_default();
        let notes = fold_keywords(&mut m, &["format", "minItems", "maxItems"]);
        append_notes(&mut m, &notes);
        assert_eq!(m["description"], "When. Format: date-time. Exactly 2 items.");
    }

    #[test]
    fn merges_all_of_when_exact() {
        let mut m = json!({"allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"properties": {"b": {"type": "integer"}}, "required": ["b"]}
        ]})
        .as_object()
        .cloned()
        .unwrap_or_default();
        assert!(merge_all_of(&mut m));
        assert_eq!(m["required"], json!(["a", "b"]));
        let mut m = json!({"type": "string", "allOf": [{"type": "integer"}]}).as_object().cloned().unwrap_or_default();
        assert!(!merge_all_of(&mut m));
    }

    #[test]
    fn field_paths_read_naturally() {
        let mut p = FieldPath::default();
        assert_eq!(p.subject(), "the top-level arguments object");
        p.push_field("tree");
        p.push_field("children");
        p.push_raw("[]");
        p.push_field("name");
        assert_eq!(p.to_string(), "tree.children[].name");
        assert_eq!(p.subject(), "field `tree.children[].name`");
    }
}
