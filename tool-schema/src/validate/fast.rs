//! A form of a schema compiled for the subset of JSON Schema that schemars emits for plain Rust types: closed
//! objects with `properties`, `required` and `additionalProperties`, primitive `type`s, `enum` and `const`, numeric
//! bounds, string and array lengths, `items`, `anyOf`/`oneOf`, and `$ref`s into the document's `$defs`. It explains
//! why an instance is invalid without jsonschema's error collection, which builds an error object per failed
//! keyword and per alternative; jsonschema lists violations when there are several (in its own order, which the
//! golden files pin). Verdicts come from [`Verdict`], this form lowered to a plan, where every node lowers, and
//! from jsonschema elsewhere; this form's own verdict walk, slower than either, decides unions inside
//! explanations.
//!
//! [`Fast::compile`] answers `None` for any schema outside the subset (a `pattern`, a known `format`, `allOf`,
//! `if`/`then`/`else`, an `$id`, a `$ref` elsewhere, any keyword it does not know), and [`CompiledSchema`] then
//! explains with jsonschema alone. Inside the subset its verdicts are jsonschema's and its violations are the same,
//! built from the same texts (`tests::agrees_with_jsonschema` checks both on generated schemas and instances).
//! Through an `anyOf`/`oneOf` that fails, [`Fast::explain`] answers [`Fallback`] and the caller asks jsonschema,
//! whose explanation of alternatives is richer.
//!
//! The walk recurses along the instance and gives up ([`Fallback`]) past [`MAX_DEPTH`] levels, so a value that was
//! not held to [`Limits`](super::Limits) first cannot overflow the stack here.
//!
//! [`CompiledSchema`]: super::CompiledSchema

use std::cmp::Ordering;
use std::collections::HashMap;

use serde_json::{Map, Number, Value};

mod verdict;

pub(super) use verdict::Verdict;

use crate::vocabulary::{integer_of, is_integer, json_equal, number_cmp};

use super::{
    Sink, Violation, array_size, join_pointer, list_options, object_size, plural, preview, push_escaped_segment,
    schema_value_text, shorten_pointer, string_size,
};

/// Deepest instance nesting walked here; deeper values are left to jsonschema.
pub(super) const MAX_DEPTH: usize = 64;

/// The walk cannot answer (too deep, or a failed union to explain): ask jsonschema.
#[derive(Debug)]
pub(super) struct Fallback;

type NodeId = usize;

/// JSON types as jsonschema orders them (`JsonTypeSet`): null, boolean, integer, number, string, array, object.
const NULL: u8 = 1;
const BOOLEAN: u8 = 1 << 1;
const INTEGER: u8 = 1 << 2;
const NUMBER: u8 = 1 << 3;
const STRING: u8 = 1 << 4;
const ARRAY: u8 = 1 << 5;
const OBJECT: u8 = 1 << 6;
const TYPE_NAMES: [(u8, &str); 7] = [
    (NULL, "null"),
    (BOOLEAN, "boolean"),
    (INTEGER, "integer"),
    (NUMBER, "number"),
    (STRING, "string"),
    (ARRAY, "array"),
    (OBJECT, "object"),
];

/// Keywords that assert nothing (annotations), or that the compiled subset handles where it meets them.
const ANNOTATIONS: [&str; 10] = [
    "title",
    "description",
    "default",
    "examples",
    "$schema",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$defs",
];

/// Formats jsonschema asserts: a schema that names one is left to it. Any other format (schemars' `uint32`,
/// `double`, ...) is an annotation, as jsonschema treats unknown formats.
const ASSERTED_FORMATS: [&str; 21] = [
    "date",
    "date-time",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
    "uuid",
    "unknown",
    "ip",
];

#[derive(Debug, Clone, Copy)]
enum Bound {
    Minimum,
    Maximum,
    ExclusiveMinimum,
    ExclusiveMaximum,
}

impl Bound {
    fn holds(self, ordering: Ordering) -> bool {
        match self {
            Bound::Minimum => ordering != Ordering::Less,
            Bound::Maximum => ordering != Ordering::Greater,
            Bound::ExclusiveMinimum => ordering == Ordering::Greater,
            Bound::ExclusiveMaximum => ordering == Ordering::Less,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Size {
    MinLength,
    MaxLength,
    MinItems,
    MaxItems,
    MinProperties,
    MaxProperties,
}

#[derive(Debug, Clone)]
enum Additional {
    Any,
    /// `additionalProperties: false`: an object may hold only the `properties`.
    Closed,
    Schema(NodeId),
}

/// One compiled schema object (or boolean schema).
#[derive(Debug, Clone)]
struct Node {
    /// The `false` schema: nothing is valid.
    nothing: bool,
    /// Whether anything beyond `type` is to be checked (most leaves of a plain struct: no).
    more: bool,
    /// Allowed types (0: no `type` keyword) and the expectation text of a mismatch.
    types: u8,
    type_text: Box<str>,
    constant: Option<(Value, Box<str>)>,
    one_of_values: Option<(Vec<Value>, Box<str>)>,
    /// Numeric bounds in jsonschema's order (minimum, maximum, exclusiveMinimum, exclusiveMaximum).
    bounds: Vec<(Bound, Number, Box<str>)>,
    /// Lengths and counts in jsonschema's order.
    sizes: Vec<(Size, u64, Box<str>)>,
    /// `required` as written (the order violations are reported in).
    required: Vec<String>,
    /// The position in `properties` of each name of `required`.
    required_at: Vec<Option<usize>>,
    /// How many of `properties` are required; each is flagged in `properties`.
    required_properties: usize,
    /// Required names that `properties` does not list (checked by lookup).
    required_elsewhere: Vec<String>,
    /// Name, schema, and whether it is required.
    properties: Vec<(String, NodeId, bool)>,
    /// An index of `properties` when there are many.
    property_index: Option<HashMap<String, usize>>,
    /// Whether `properties` was given (a closed object without it is reported per member, like with it).
    additional: Additional,
    items: Option<NodeId>,
    any_of: Vec<NodeId>,
    one_of: Vec<NodeId>,
    reference: Option<NodeId>,
}

impl Node {
    fn empty() -> Node {
        Node {
            nothing: false,
            more: false,
            types: 0,
            type_text: Box::from(""),
            constant: None,
            one_of_values: None,
            bounds: Vec::new(),
            sizes: Vec::new(),
            required: Vec::new(),
            required_at: Vec::new(),
            required_properties: 0,
            required_elsewhere: Vec::new(),
            properties: Vec::new(),
            property_index: None,
            additional: Additional::Any,
            items: None,
            any_of: Vec::new(),
            one_of: Vec::new(),
            reference: None,
        }
    }

    /// The position of `name` in `properties`, trying `hint` first (members usually come in schema order).
    #[inline]
    fn property_after(&self, name: &str, hint: usize) -> Option<usize> {
        match self.properties.get(hint) {
            Some((n, _, _)) if n == name => Some(hint),
            _ => self.property(name),
        }
    }

    /// The position of `name` in `properties`.
    fn property(&self, name: &str) -> Option<usize> {
        match &self.property_index {
            Some(index) => index.get(name).copied(),
            None => self.properties.iter().position(|(n, _, _)| n == name),
        }
    }
}

/// A schema of the supported subset, compiled; see the module docs.
#[derive(Debug, Clone)]
pub(super) struct Fast {
    nodes: Vec<Node>,
}

/// Compilation state: the nodes so far and the `$defs` entries already compiled (or being compiled).
struct Compiler<'s> {
    root: &'s Map<String, Value>,
    nodes: Vec<Node>,
    defs: HashMap<String, NodeId>,
}

impl Fast {
    /// The specialised validator of `schema`, or `None` when the schema is outside the subset. `schema` must
    /// already have compiled with jsonschema (so it is a valid draft 2020-12 schema).
    pub(super) fn compile(schema: &Value) -> Option<Fast> {
        let no_defs = Map::new();
        let root = schema.as_object().unwrap_or(&no_defs);
        let mut compiler = Compiler { root, nodes: Vec::new(), defs: HashMap::new() };
        compiler.node(schema, 0)?;
        Some(Fast { nodes: compiler.nodes })
    }

    /// Whether `instance` is valid (the verdict `tests` compare with jsonschema's; inside [`Fast::explain`], the
    /// same walk decides the unions).
    #[cfg(test)]
    pub(super) fn is_valid(&self, instance: &Value) -> Result<bool, Fallback> {
        self.valid(0, instance, 0)
    }

    /// The violations of `instance`, in the order jsonschema reports them for one schema object; empty when it
    /// is valid.
    pub(super) fn explain(&self, instance: &Value, sink: &mut Sink) -> Result<(), Fallback> {
        // Room for the pointers of most instances at once (the path grows and shrinks along the walk).
        let mut path = String::with_capacity(128);
        self.explain_node(0, instance, &mut path, sink, 0)
    }

    fn valid(&self, id: NodeId, v: &Value, depth: usize) -> Result<bool, Fallback> {
        if depth > MAX_DEPTH {
            return Err(Fallback);
        }
        let node = &self.nodes[id];
        if node.nothing {
            return Ok(false);
        }
        if node.types != 0 && !has_type(node.types, v) {
            return Ok(false);
        }
        if !node.more {
            return Ok(true);
        }
        if let Some((c, _)) = &node.constant
            && !json_equal(c, v)
        {
            return Ok(false);
        }
        if let Some((values, _)) = &node.one_of_values
            && !values.iter().any(|e| json_equal(e, v))
        {
            return Ok(false);
        }
        if let Value::Number(n) = v {
            for (bound, limit, _) in &node.bounds {
                if !bound.holds(number_cmp(n, limit)) {
                    return Ok(false);
                }
            }
        }
        for (size, limit, _) in &node.sizes {
            if !size_holds(*size, *limit, v) {
                return Ok(false);
            }
        }
        match v {
            Value::Object(object) => {
                // Required properties are counted while the members are walked: no lookup by hash.
                let mut required = 0;
                let mut hint = 0;
                for (name, value) in object {
                    let schema = match node.property_after(name, hint) {
                        Some(i) => {
                            let (_, id, is_required) = &node.properties[i];
                            required += usize::from(*is_required);
                            hint = i + 1;
                            *id
                        }
                        None => match node.additional {
                            Additional::Any => continue,
                            Additional::Closed => return Ok(false),
                            Additional::Schema(id) => id,
                        },
                    };
                    if !self.valid(schema, value, depth + 1)? {
                        return Ok(false);
                    }
                }
                if required != node.required_properties
                    || node.required_elsewhere.iter().any(|name| !object.contains_key(name))
                {
                    return Ok(false);
                }
            }
            Value::Array(items) => {
                if let Some(schema) = node.items {
                    for item in items {
                        if !self.valid(schema, item, depth + 1)? {
                            return Ok(false);
                        }
                    }
                }
            }
            _ => {}
        }
        if !self.valid_union(node, v, depth)? {
            return Ok(false);
        }
        if let Some(target) = node.reference {
            return self.valid(target, v, depth + 1);
        }
        Ok(true)
    }

    fn explain_node(
        &self,
        id: NodeId,
        v: &Value,
        path: &mut String,
        sink: &mut Sink,
        depth: usize,
    ) -> Result<(), Fallback> {
        if depth > MAX_DEPTH {
            return Err(Fallback);
        }
        let node = &self.nodes[id];
        if node.nothing {
            sink.push(Violation::new(shorten_pointer(path), "no value here (the schema allows nothing)", preview(v)));
            return Ok(());
        }
        if node.types != 0 && !has_type(node.types, v) {
            sink.push(Violation::new(shorten_pointer(path), &*node.type_text, preview(v)));
        }
        if let Some((c, text)) = &node.constant
            && !json_equal(c, v)
        {
            sink.push(Violation::new(shorten_pointer(path), &**text, preview(v)));
        }
        if let Some((values, text)) = &node.one_of_values
            && !values.iter().any(|e| json_equal(e, v))
        {
            sink.push(Violation::new(shorten_pointer(path), &**text, preview(v)));
        }
        if let Value::Number(n) = v {
            for (bound, limit, text) in &node.bounds {
                if !bound.holds(number_cmp(n, limit)) {
                    sink.push(Violation::new(shorten_pointer(path), &**text, preview(v)));
                }
            }
        }
        for (size, limit, text) in &node.sizes {
            if !size_holds(*size, *limit, v) {
                let found = match size {
                    Size::MinLength | Size::MaxLength => string_size(v),
                    Size::MinItems | Size::MaxItems => array_size(v),
                    Size::MinProperties | Size::MaxProperties => object_size(v),
                };
                sink.push(Violation::new(shorten_pointer(path), &**text, found));
            }
        }
        match v {
            Value::Object(object) => {
                // Each property's member, by one walk of the members (no lookup by hash; no allocation for up to
                // 16 properties).
                let mut inline: [Option<&Value>; 16] = [None; 16];
                let mut spilled: Vec<Option<&Value>>;
                let present: &mut [Option<&Value>] = match inline.get_mut(..node.properties.len()) {
                    Some(present) => present,
                    None => {
                        spilled = vec![None; node.properties.len()];
                        &mut spilled
                    }
                };
                let (mut hint, mut matched) = (0, 0);
                for (name, value) in object {
                    if let Some(i) = node.property_after(name, hint) {
                        present[i] = Some(value);
                        hint = i + 1;
                        matched += 1;
                    }
                }
                for (name, at) in node.required.iter().zip(&node.required_at) {
                    let here = match at {
                        Some(i) => present[*i].is_some(),
                        None => object.contains_key(name),
                    };
                    if !here {
                        sink.push(Violation::new(
                            join_pointer(path, name),
                            format!("required property `{}`", super::name_preview(name)),
                            "nothing",
                        ));
                    }
                }
                for ((name, schema, _), value) in node.properties.iter().zip(present.iter()) {
                    if let Some(value) = value {
                        let len = path.len();
                        path.push('/');
                        push_escaped_segment(path, name);
                        let r = self.explain_node(*schema, value, path, sink, depth + 1);
                        path.truncate(len);
                        r?;
                    }
                }
                // Members beyond the properties, if any.
                let extra = matched < object.len();
                match node.additional {
                    Additional::Any => {}
                    Additional::Closed if !extra => {}
                    Additional::Closed => {
                        for (name, value) in object {
                            if node.property(name).is_none() {
                                if sink.overflowed {
                                    return Ok(());
                                }
                                sink.push(Violation::new(
                                    join_pointer(path, name),
                                    format!("no property `{}` (not in the schema)", super::name_preview(name)),
                                    preview(value),
                                ));
                            }
                        }
                    }
                    Additional::Schema(_) if !extra => {}
                    Additional::Schema(schema) => {
                        for (name, value) in object {
                            if node.property(name).is_none() {
                                let len = path.len();
                                path.push('/');
                                push_escaped_segment(path, name);
                                let r = self.explain_node(schema, value, path, sink, depth + 1);
                                path.truncate(len);
                                r?;
                            }
                        }
                    }
                }
            }
            Value::Array(items) => {
                if let Some(schema) = node.items {
                    for (i, item) in items.iter().enumerate() {
                        let len = path.len();
                        path.push('/');
                        path.push_str(itoa(i).as_str());
                        let r = self.explain_node(schema, item, path, sink, depth + 1);
                        path.truncate(len);
                        r?;
                    }
                }
            }
            _ => {}
        }
        if sink.overflowed {
            return Ok(());
        }
        // A failed union is explained by jsonschema (it merges and ranks the alternatives).
        if (!node.any_of.is_empty() || !node.one_of.is_empty()) && !self.valid_union(node, v, depth)? {
            return Err(Fallback);
        }
        if let Some(target) = node.reference {
            self.explain_node(target, v, path, sink, depth + 1)?;
        }
        Ok(())
    }

    /// Whether the `anyOf` and `oneOf` of `node` hold for `v`.
    fn valid_union(&self, node: &Node, v: &Value, depth: usize) -> Result<bool, Fallback> {
        if !node.any_of.is_empty() {
            let mut any = false;
            for &branch in &node.any_of {
                if self.valid(branch, v, depth + 1)? {
                    any = true;
                    break;
                }
            }
            if !any {
                return Ok(false);
            }
        }
        if !node.one_of.is_empty() {
            let mut matched = 0;
            for &branch in &node.one_of {
                if self.valid(branch, v, depth + 1)? {
                    matched += 1;
                }
            }
            if matched != 1 {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl Compiler<'_> {
    /// Compiles `schema` into a new node; `None` when it (or anything it reaches) is outside the subset.
    fn node(&mut self, schema: &Value, depth: usize) -> Option<NodeId> {
        if depth > MAX_DEPTH {
            return None;
        }
        let id = self.nodes.len();
        self.nodes.push(Node::empty());
        let node = match schema {
            Value::Bool(true) => Node::empty(),
            Value::Bool(false) => Node { nothing: true, ..Node::empty() },
            Value::Object(map) => self.object(map, depth)?,
            _ => return None,
        };
        self.nodes[id] = node;
        Some(id)
    }

    fn object(&mut self, map: &Map<String, Value>, depth: usize) -> Option<Node> {
        let mut node = Node::empty();
        let mut bounds: [Option<(Bound, Number, Box<str>)>; 4] = Default::default();
        let mut sizes: [Option<(Size, u64, Box<str>)>; 6] = Default::default();
        for (key, value) in map {
            match key.as_str() {
                "type" => {
                    let (types, text) = types(value)?;
                    node.types = types;
                    node.type_text = text.into();
                }
                "const" => {
                    node.constant = Some((value.clone(), format!("exactly {}", schema_value_text(value)).into()));
                }
                "enum" => {
                    let values = value.as_array()?;
                    let texts: Vec<String> = values.iter().map(schema_value_text).collect();
                    node.one_of_values = Some((values.clone(), format!("one of: {}", list_options(&texts)).into()));
                }
                "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                    let Value::Number(limit) = value else { return None };
                    let text = schema_value_text(value);
                    let (slot, bound, text) = match key.as_str() {
                        "minimum" => (0, Bound::Minimum, format!("a number at least {text}")),
                        "maximum" => (1, Bound::Maximum, format!("a number at most {text}")),
                        "exclusiveMinimum" => (2, Bound::ExclusiveMinimum, format!("a number greater than {text}")),
                        _ => (3, Bound::ExclusiveMaximum, format!("a number less than {text}")),
                    };
                    bounds[slot] = Some((bound, limit.clone(), text.into()));
                }
                "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties" | "maxProperties" => {
                    let limit = value.as_u64()?;
                    let (slot, size, text) = match key.as_str() {
                        "minLength" => (0, Size::MinLength, at_least(limit, "character")),
                        "maxLength" => (1, Size::MaxLength, at_most(limit, "character")),
                        "minItems" => (2, Size::MinItems, at_least(limit, "item")),
                        "maxItems" => (3, Size::MaxItems, at_most(limit, "item")),
                        "minProperties" => (4, Size::MinProperties, at_least(limit, "property")),
                        _ => (5, Size::MaxProperties, at_most(limit, "property")),
                    };
                    sizes[slot] = Some((size, limit, text.into()));
                }
                "required" => {
                    node.required =
                        value.as_array()?.iter().map(|n| n.as_str().map(str::to_owned)).collect::<Option<_>>()?;
                }
                "properties" => {
                    for (name, schema) in value.as_object()? {
                        let id = self.node(schema, depth + 1)?;
                        node.properties.push((name.clone(), id, false));
                    }
                    if node.properties.len() > 16 {
                        let index = node.properties.iter().enumerate().map(|(i, (n, _, _))| (n.clone(), i));
                        node.property_index = Some(index.collect());
                    }
                }
                "additionalProperties" => {
                    node.additional = match value {
                        Value::Bool(true) => Additional::Any,
                        Value::Bool(false) => Additional::Closed,
                        schema => Additional::Schema(self.node(schema, depth + 1)?),
                    };
                }
                "items" => node.items = Some(self.node(value, depth + 1)?),
                "anyOf" | "oneOf" => {
                    let mut branches = Vec::new();
                    for branch in value.as_array()? {
                        branches.push(self.node(branch, depth + 1)?);
                    }
                    if key == "anyOf" {
                        node.any_of = branches;
                    } else {
                        node.one_of = branches;
                    }
                }
                "$ref" => node.reference = Some(self.reference(value.as_str()?, depth)?),
                "format" => {
                    if ASSERTED_FORMATS.contains(&value.as_str()?) {
                        return None;
                    }
                }
                "definitions" => {}
                k if ANNOTATIONS.contains(&k) || k.starts_with("x-") => {}
                _ => return None,
            }
        }
        node.required_at = node.required.iter().map(|name| node.property(name)).collect();
        for name in &node.required {
            match node.property(name) {
                Some(i) if !node.properties[i].2 => {
                    node.properties[i].2 = true;
                    node.required_properties += 1;
                }
                Some(_) => {}
                None if !node.required_elsewhere.contains(name) => node.required_elsewhere.push(name.clone()),
                None => {}
            }
        }
        node.bounds = bounds.into_iter().flatten().collect();
        node.sizes = sizes.into_iter().flatten().collect();
        node.more = node.constant.is_some()
            || node.one_of_values.is_some()
            || !node.bounds.is_empty()
            || !node.sizes.is_empty()
            || !node.required.is_empty()
            || !node.properties.is_empty()
            || !matches!(node.additional, Additional::Any)
            || node.items.is_some()
            || !node.any_of.is_empty()
            || !node.one_of.is_empty()
            || node.reference.is_some();
        Some(node)
    }

    /// The node of `#/$defs/NAME` (or `#/definitions/NAME`), compiled once; recursion reuses the node.
    fn reference(&mut self, reference: &str, depth: usize) -> Option<NodeId> {
        let (section, name) = reference
            .strip_prefix("#/$defs/")
            .map(|n| ("$defs", n))
            .or_else(|| reference.strip_prefix("#/definitions/").map(|n| ("definitions", n)))?;
        if name.contains(['/', '~', '%']) {
            return None;
        }
        let key = format!("{section}/{name}");
        if let Some(&id) = self.defs.get(&key) {
            return Some(id);
        }
        let target = self.root.get(section)?.get(name)?;
        // Registered before compiling, so a recursive reference finds this node.
        let id = self.nodes.len();
        self.defs.insert(key, id);
        let compiled = self.node(target, depth + 1)?;
        debug_assert_eq!(compiled, id);
        Some(id)
    }
}

/// The type mask and the mismatch text of a `type` keyword (names in jsonschema's order, `null` last).
fn types(value: &Value) -> Option<(u8, String)> {
    let mut mask = 0u8;
    let mut add = |name: &str| -> Option<()> {
        mask |= TYPE_NAMES.iter().find(|(_, n)| *n == name)?.0;
        Some(())
    };
    match value {
        Value::String(name) => add(name)?,
        Value::Array(names) => {
            for name in names {
                add(name.as_str()?)?;
            }
        }
        _ => return None,
    }
    let mut names: Vec<&str> = TYPE_NAMES.iter().filter(|(bit, _)| mask & bit != 0).map(|(_, n)| *n).collect();
    names.sort_by_key(|n| *n == "null");
    Some((mask, names.join(" or ")))
}

fn at_least(limit: u64, word: &str) -> String {
    format!("at least {limit} {}", plural(limit, word))
}

fn at_most(limit: u64, word: &str) -> String {
    format!("at most {limit} {}", plural(limit, word))
}

fn has_type(mask: u8, v: &Value) -> bool {
    let bit = match v {
        Value::Null => NULL,
        Value::Bool(_) => BOOLEAN,
        Value::Number(n) => {
            if mask & NUMBER != 0 {
                return true;
            }
            return mask & INTEGER != 0 && is_integer(n);
        }
        Value::String(_) => STRING,
        Value::Array(_) => ARRAY,
        Value::Object(_) => OBJECT,
    };
    mask & bit != 0
}

fn size_holds(size: Size, limit: u64, v: &Value) -> bool {
    let (n, at_least) = match (size, v) {
        (Size::MinLength, Value::String(s)) => (s.chars().count() as u64, true),
        (Size::MaxLength, Value::String(s)) => (s.chars().count() as u64, false),
        (Size::MinItems, Value::Array(a)) => (a.len() as u64, true),
        (Size::MaxItems, Value::Array(a)) => (a.len() as u64, false),
        (Size::MinProperties, Value::Object(o)) => (o.len() as u64, true),
        (Size::MaxProperties, Value::Object(o)) => (o.len() as u64, false),
        _ => return true,
    };
    if at_least { n >= limit } else { n <= limit }
}

/// An index as decimal text, without going through `fmt`.
fn itoa(mut i: usize) -> ItoaBuf {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (i % 10) as u8;
        i /= 10;
        if i == 0 {
            break;
        }
    }
    ItoaBuf { buf, at }
}

struct ItoaBuf {
    buf: [u8; 20],
    at: usize,
}

impl ItoaBuf {
    fn as_str(&self) -> &str {
        // Only ASCII digits were written.
        std::str::from_utf8(&self.buf[self.at..]).unwrap_or("0")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::{CompiledSchema, Sink, Violation};
    use super::{Fast, Verdict};

    /// xorshift64*: a small deterministic generator, so every failure replays from its seed.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn chance(&mut self, percent: u64) -> bool {
            self.below(100) < percent
        }
        fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
            &items[self.below(items.len() as u64) as usize]
        }
    }

    const NAMES: [&str; 8] = ["id", "severity", "limit", "tags", "a/b", "t~x", "ünï", "n"];
    const STRINGS: [&str; 7] = ["", "low", "high", "a\nb", "ünïcødé", "x", "a much longer string value"];

    fn number(rng: &mut Rng) -> Value {
        match rng.below(9) {
            0 => json!(0),
            1 => json!(-3),
            2 => json!(50),
            3 => json!(1.0),
            4 => json!(2.5),
            5 => json!(u64::MAX),
            6 => json!(i64::MIN),
            7 => json!(1.8446744073709552e19),
            _ => json!(rng.below(100) as i64 - 20),
        }
    }

    fn scalar(rng: &mut Rng) -> Value {
        match rng.below(5) {
            0 => Value::Null,
            1 => json!(rng.chance(50)),
            2 => number(rng),
            _ => json!(rng.pick(&STRINGS)),
        }
    }

    /// A schema inside the subset; `defs` collects `$defs` entries that `$ref`s name.
    fn schema(rng: &mut Rng, depth: u32, defs: &mut serde_json::Map<String, Value>) -> Value {
        let leaf = depth >= 3;
        let mut s = serde_json::Map::new();
        if rng.chance(20) {
            s.insert("description".into(), json!("documented"));
        }
        match rng.below(if leaf { 7 } else { 13 }) {
            0 => {
                s.insert("type".into(), json!("string"));
                if rng.chance(40) {
                    s.insert("minLength".into(), json!(rng.below(3)));
                }
                if rng.chance(40) {
                    s.insert("maxLength".into(), json!(rng.below(8)));
                }
            }
            1 => {
                s.insert("type".into(), json!("integer"));
                if rng.chance(40) {
                    s.insert("format".into(), json!("uint32"));
                }
                for k in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
                    if rng.chance(25) {
                        s.insert(k.into(), number(rng));
                    }
                }
            }
            2 => {
                s.insert("type".into(), json!("number"));
                for k in ["minimum", "maximum"] {
                    if rng.chance(40) {
                        s.insert(k.into(), number(rng));
                    }
                }
            }
            3 => {
                s.insert("type".into(), json!(*rng.pick(&["boolean", "null"])));
            }
            4 => {
                let values: Vec<Value> = (0..1 + rng.below(4)).map(|_| scalar(rng)).collect();
                if rng.chance(50) {
                    s.insert("type".into(), json!("string"));
                }
                s.insert("enum".into(), Value::Array(values));
            }
            5 => {
                s.insert("const".into(), scalar(rng));
            }
            6 => {
                const TYPES: [&[&str]; 4] =
                    [&["string", "null"], &["integer", "null"], &["number", "string"], &["null", "boolean", "array"]];
                let types = *rng.pick(&TYPES);
                s.insert("type".into(), json!(types));
            }
            7 | 8 => {
                s.insert("type".into(), json!("object"));
                let mut props = serde_json::Map::new();
                for _ in 0..rng.below(4) {
                    props.insert((*rng.pick(&NAMES)).into(), schema(rng, depth + 1, defs));
                }
                let required: Vec<&String> = props.keys().filter(|_| rng.chance(60)).collect();
                if !required.is_empty() || rng.chance(20) {
                    let mut required: Vec<Value> = required.into_iter().map(|k| json!(k)).collect();
                    if rng.chance(10) {
                        required.push(json!("absent_from_properties"));
                    }
                    s.insert("required".into(), Value::Array(required));
                }
                if !props.is_empty() || rng.chance(50) {
                    s.insert("properties".into(), Value::Object(props));
                }
                match rng.below(4) {
                    0 => {}
                    1 => {
                        s.insert("additionalProperties".into(), json!(false));
                    }
                    2 => {
                        s.insert("additionalProperties".into(), json!(true));
                    }
                    _ => {
                        s.insert("additionalProperties".into(), schema(rng, depth + 1, defs));
                    }
                }
                if rng.chance(15) {
                    s.insert("maxProperties".into(), json!(rng.below(3)));
                }
                if rng.chance(10) {
                    s.insert("minProperties".into(), json!(rng.below(3)));
                }
            }
            9 => {
                s.insert("type".into(), json!("array"));
                s.insert("items".into(), schema(rng, depth + 1, defs));
                if rng.chance(30) {
                    s.insert("minItems".into(), json!(rng.below(2)));
                }
                if rng.chance(30) {
                    s.insert("maxItems".into(), json!(rng.below(4)));
                }
            }
            10 => {
                let branches: Vec<Value> = (0..2 + rng.below(2)).map(|_| schema(rng, depth + 1, defs)).collect();
                s.insert((*rng.pick(&["anyOf", "oneOf"])).into(), Value::Array(branches));
            }
            11 => {
                // What schemars gives a unit-variant enum with doc comments (sometimes with a repeated value).
                let names = ["low", "high", "medium", "low"];
                let variants: Vec<Value> = (0..1 + rng.below(3))
                    .map(|_| json!({"type": "string", "const": *rng.pick(&names), "description": "a variant"}))
                    .collect();
                if rng.chance(30) {
                    s.insert("type".into(), json!("string"));
                }
                s.insert("oneOf".into(), Value::Array(variants));
            }
            _ => {
                let name = format!("D{}", defs.len());
                defs.insert(name.clone(), Value::Null);
                let target = schema(rng, depth + 1, defs);
                defs.insert(name.clone(), target);
                s.insert("$ref".into(), json!(format!("#/$defs/{name}")));
            }
        }
        if rng.chance(3) {
            return json!(rng.chance(50));
        }
        Value::Object(s)
    }

    /// An instance shaped by `schema` most of the time, with mistakes.
    fn instance(rng: &mut Rng, schema: &Value, root: &Value, depth: u32) -> Value {
        if depth > 6 || rng.chance(15) {
            return scalar(rng);
        }
        let Some(s) = schema.as_object() else { return scalar(rng) };
        if let Some(r) = s.get("$ref").and_then(Value::as_str) {
            let target = root.pointer(&r[1..]).cloned().unwrap_or(Value::Null);
            return instance(rng, &target, root, depth + 1);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(branches) = s.get(key).and_then(Value::as_array) {
                let branch = rng.pick(branches);
                return instance(rng, branch, root, depth + 1);
            }
        }
        if let Some(values) = s.get("enum").and_then(Value::as_array) {
            return rng.pick(values).clone();
        }
        if let Some(c) = s.get("const") {
            return c.clone();
        }
        match s.get("type") {
            Some(Value::String(t)) if t == "object" => {
                let mut out = serde_json::Map::new();
                if let Some(props) = s.get("properties").and_then(Value::as_object) {
                    for (name, sub) in props {
                        if rng.chance(75) {
                            out.insert(name.clone(), instance(rng, sub, root, depth + 1));
                        }
                    }
                }
                if rng.chance(20) {
                    out.insert((*rng.pick(&["extra", "a/b", "force"])).into(), scalar(rng));
                }
                Value::Object(out)
            }
            Some(Value::String(t)) if t == "array" => {
                let item = s.get("items").cloned().unwrap_or(Value::Bool(true));
                Value::Array((0..rng.below(5)).map(|_| instance(rng, &item, root, depth + 1)).collect())
            }
            Some(Value::String(t)) if t == "string" => json!(rng.pick(&STRINGS)),
            Some(Value::String(t)) if t == "integer" || t == "number" => number(rng),
            _ => scalar(rng),
        }
    }

    fn sorted(mut v: Vec<Violation>) -> Vec<Violation> {
        v.sort_by(|a, b| (&a.pointer, &a.expected, &a.found).cmp(&(&b.pointer, &b.expected, &b.found)));
        v
    }

    /// Checks one schema and instance: the same verdict as jsonschema, and (unless it falls back) the same
    /// violations. Returns whether the fast explanation answered.
    fn check(compiled: &CompiledSchema, schema: &Value, instance: &Value) -> bool {
        let fast = Fast::compile(schema).unwrap_or_else(|| panic!("outside the subset: {schema}"));
        let expected = compiled.validator.is_valid(instance);
        if let Some(plan) = Verdict::lower(&fast) {
            let verdict = plan.is_valid(instance);
            assert_eq!(verdict, expected, "the plan's verdict differs\nschema: {schema}\ninstance: {instance}");
        }
        let Ok(verdict) = fast.is_valid(instance) else { return false };
        assert_eq!(verdict, expected, "verdict differs\nschema: {schema}\ninstance: {instance}");
        if expected {
            return true;
        }
        let mut sink = Sink::default();
        if fast.explain(instance, &mut sink).is_err() {
            return false;
        }
        let theirs = compiled.explain_with_jsonschema(instance);
        assert_eq!(sink.overflowed, theirs.overflowed, "schema: {schema}\ninstance: {instance}");
        if theirs.out.len() <= 1 {
            assert_eq!(sink.out, theirs.out, "schema: {schema}\ninstance: {instance}");
        } else {
            assert_eq!(sorted(sink.out), sorted(theirs.out), "schema: {schema}\ninstance: {instance}");
        }
        true
    }

    #[test]
    fn agrees_with_jsonschema() {
        let (mut invalid, mut explained, mut lowered) = (0, 0, 0);
        for seed in 1..=3_000u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let mut defs = serde_json::Map::new();
            let mut root = schema(&mut rng, 0, &mut defs);
            if !defs.is_empty()
                && let Value::Object(map) = &mut root
            {
                map.insert("$defs".into(), Value::Object(defs));
            }
            let compiled = CompiledSchema::compile(&root).expect("compiles");
            lowered += usize::from(compiled.verdict.is_some());
            for _ in 0..8 {
                let value = instance(&mut rng, &root, &root, 0);
                if !compiled.validator.is_valid(&value) {
                    invalid += 1;
                    explained += usize::from(check(&compiled, &root, &value));
                } else {
                    check(&compiled, &root, &value);
                }
            }
        }
        // The generator must exercise both paths, and most explanations must not fall back.
        assert!(invalid > 5_000, "{invalid} invalid instances");
        assert!(explained * 2 > invalid, "{explained} of {invalid} explained without falling back");
        // And the verdict plan must stand in for jsonschema on many of the schemas.
        assert!(lowered > 1_000, "{lowered} of 3000 schemas lowered to a verdict plan");
    }

    #[test]
    fn numbers_compare_exactly() {
        let cases = [
            (json!({"type": "integer"}), json!(1.0)),
            (json!({"type": "integer"}), json!(1.5)),
            (json!({"maximum": 18446744073709551615u64}), json!(1.8446744073709552e19)),
            (json!({"minimum": 9007199254740993u64}), json!(9007199254740992.0)),
            (json!({"exclusiveMaximum": 1}), json!(0.9999999999999999)),
            (json!({"enum": [1, "a"]}), json!(1.0)),
            (json!({"const": {"a": [1, 2.0]}}), json!({"a": [1.0, 2]})),
            (json!({"minimum": -1.5}), json!(i64::MIN)),
            // Integer bounds are checked as one range: both ends, exclusive ends, the extremes, an empty range.
            (json!({"exclusiveMinimum": 1, "maximum": 3}), json!(1)),
            (json!({"exclusiveMinimum": 1, "maximum": 3}), json!(2)),
            (json!({"exclusiveMinimum": 1, "maximum": 3}), json!(3)),
            (json!({"exclusiveMinimum": 1, "maximum": 3}), json!(4)),
            (json!({"exclusiveMinimum": 1, "maximum": 3}), json!(1.5)),
            (json!({"exclusiveMaximum": i64::MIN}), json!(i64::MIN)),
            (json!({"exclusiveMaximum": 18446744073709551615u64}), json!(u64::MAX)),
            (json!({"minimum": -1, "exclusiveMaximum": 18446744073709551615u64}), json!(-1)),
            (json!({"minimum": 5, "maximum": 3}), json!(4)),
            (json!({"minimum": 1, "maximum": 2.5}), json!(2)),
        ];
        for (schema, instance) in cases {
            let compiled = CompiledSchema::compile(&schema).expect("compiles");
            check(&compiled, &schema, &instance);
        }
    }

    #[test]
    fn schemas_outside_the_subset_are_left_to_jsonschema() {
        for schema in [
            json!({"type": "string", "pattern": "^a"}),
            json!({"type": "string", "format": "date-time"}),
            json!({"allOf": [{"type": "string"}]}),
            json!({"$ref": "#/properties/a", "properties": {"a": {}}}),
            json!({"type": "array", "uniqueItems": true}),
            json!({"type": "array", "prefixItems": [{}]}),
            json!({"if": {}, "then": {}}),
            json!({"$id": "urn:x", "type": "string"}),
            json!({"type": "number", "multipleOf": 2}),
        ] {
            assert!(Fast::compile(&schema).is_none(), "{schema}");
        }
        // Annotations and unknown formats are not.
        let plain = json!({"type": "integer", "format": "uint32", "title": "T", "x-mcp-header": "A", "default": 1});
        assert!(Fast::compile(&plain).is_some());
    }

    #[test]
    fn deep_instances_fall_back_instead_of_recursing() {
        let schema = json!({"$ref": "#/$defs/L", "$defs": {"L": {"type": "array", "items": {"$ref": "#/$defs/L"}}}});
        let fast = Fast::compile(&schema).expect("in the subset");
        let mut v = json!([]);
        for _ in 0..super::MAX_DEPTH {
            v = json!([v]);
        }
        assert!(fast.is_valid(&v).is_err());
        let compiled = CompiledSchema::compile(&schema).expect("compiles");
        assert!(compiled.is_valid(&v), "jsonschema answers for the deep value");
    }
}
