//! The JSON Schema vocabulary, once: every keyword keel knows with its kind (validation, annotation, applicator,
//! reference, core) and where it holds subschemas; one visitor over a schema's direct subschemas; one resolver of
//! local `$ref`s (percent-decoded JSON pointers); one depth limit; the types and equality of values; the ranges of
//! the integer formats. The schema transforms, the validator, the provider lint, the schema lock and
//! `keel-tools-catalog`'s narrowing check all read schemas through this module.
//!
//! The table covers JSON Schema 2020-12 and the draft-07 spellings schemars and MCP peers still emit
//! (`definitions`, `dependencies`, `additionalItems`, tuple `items`).

use std::cmp::Ordering;

use serde_json::{Number, Value};

/// The deepest subschema nesting any walker descends into. Real tool schemas are a few levels deep; the limit only
/// exists so that an absurd schema cannot overflow the stack.
pub const MAX_DEPTH: usize = 128;

/// What a keyword does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeywordKind {
    /// Constrains the instance itself (`type`, `minimum`, `required`, `format`, ...).
    Validation,
    /// Describes the instance and constrains nothing (`title`, `description`, `default`, `examples`, ...).
    Annotation,
    /// Applies subschemas to the instance or its parts (`properties`, `items`, `anyOf`, `not`, ...).
    Applicator,
    /// Stands for another schema (`$ref`, `$dynamicRef`).
    Reference,
    /// Identifies the schema or holds definitions for references; constrains nothing by itself (`$schema`, `$id`,
    /// `$anchor`, `$defs`).
    Core,
}

/// How a keyword holds subschemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Slot {
    /// One subschema (`items`, `additionalProperties`, `not`, ...). `items` may also be a draft-07 tuple array.
    Single,
    /// An array of subschemas (`anyOf`, `prefixItems`, ...).
    List,
    /// A map from names to subschemas (`properties`, `$defs`, ...).
    Named,
}

/// One keyword of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keyword {
    /// The keyword as written.
    pub name: &'static str,
    /// What it does.
    pub kind: KeywordKind,
    /// Where it holds subschemas, if it does.
    pub slot: Option<Slot>,
    /// A bound on one value's size, range or form (`minimum`, `maxLength`, `pattern`, `format`, ...), as opposed to
    /// the structure (`type`, `enum`, `required`).
    pub constraint: bool,
}

const fn k(name: &'static str, kind: KeywordKind, slot: Option<Slot>, constraint: bool) -> Keyword {
    Keyword { name, kind, slot, constraint }
}

use KeywordKind::{Annotation, Applicator, Core, Reference, Validation};
use Slot::{List, Named, Single};

/// Every keyword keel knows.
pub const KEYWORDS: &[Keyword] = &[
    // Core.
    k("$schema", Core, None, false),
    k("$id", Core, None, false),
    k("$anchor", Core, None, false),
    k("$dynamicAnchor", Core, None, false),
    k("$vocabulary", Core, None, false),
    k("$defs", Core, Some(Named), false),
    k("definitions", Core, Some(Named), false),
    // References.
    k("$ref", Reference, None, false),
    k("$dynamicRef", Reference, None, false),
    k("$recursiveRef", Reference, None, false),
    // Applicators.
    k("allOf", Applicator, Some(List), false),
    k("anyOf", Applicator, Some(List), false),
    k("oneOf", Applicator, Some(List), false),
    k("not", Applicator, Some(Single), false),
    k("if", Applicator, Some(Single), false),
    k("then", Applicator, Some(Single), false),
    k("else", Applicator, Some(Single), false),
    k("dependentSchemas", Applicator, Some(Named), false),
    k("dependencies", Applicator, Some(Named), false),
    k("prefixItems", Applicator, Some(List), false),
    k("items", Applicator, Some(Single), false),
    k("additionalItems", Applicator, Some(Single), false),
    k("contains", Applicator, Some(Single), false),
    k("properties", Applicator, Some(Named), false),
    k("patternProperties", Applicator, Some(Named), false),
    k("additionalProperties", Applicator, Some(Single), false),
    k("propertyNames", Applicator, Some(Single), false),
    k("unevaluatedItems", Applicator, Some(Single), false),
    k("unevaluatedProperties", Applicator, Some(Single), false),
    // Validation.
    k("type", Validation, None, false),
    k("enum", Validation, None, false),
    k("const", Validation, None, false),
    k("required", Validation, None, false),
    k("dependentRequired", Validation, None, false),
    k("multipleOf", Validation, None, true),
    k("minimum", Validation, None, true),
    k("exclusiveMinimum", Validation, None, true),
    k("maximum", Validation, None, true),
    k("exclusiveMaximum", Validation, None, true),
    k("minLength", Validation, None, true),
    k("maxLength", Validation, None, true),
    k("pattern", Validation, None, true),
    k("format", Validation, None, true),
    k("minItems", Validation, None, true),
    k("maxItems", Validation, None, true),
    k("uniqueItems", Validation, None, true),
    k("minContains", Validation, None, true),
    k("maxContains", Validation, None, true),
    k("minProperties", Validation, None, true),
    k("maxProperties", Validation, None, true),
    // Annotations (the meta-data and content vocabularies, and `$comment`).
    k("title", Annotation, None, false),
    k("description", Annotation, None, false),
    k("default", Annotation, None, false),
    k("examples", Annotation, None, false),
    k("deprecated", Annotation, None, false),
    k("readOnly", Annotation, None, false),
    k("writeOnly", Annotation, None, false),
    k("$comment", Annotation, None, false),
    k("contentEncoding", Annotation, None, false),
    k("contentMediaType", Annotation, None, false),
    k("contentSchema", Annotation, Some(Single), false),
];

/// The keyword named `name`, if keel knows it.
pub fn keyword(name: &str) -> Option<&'static Keyword> {
    KEYWORDS.iter().find(|k| k.name == name)
}

/// The kind of `name`; `None` for a keyword keel does not know (an extension such as `x-keel-content`).
pub fn kind(name: &str) -> Option<KeywordKind> {
    keyword(name).map(|k| k.kind)
}

/// Whether `name` describes without constraining: an annotation.
pub fn is_annotation(name: &str) -> bool {
    kind(name) == Some(Annotation)
}

/// Whether `name` carries no assertion of its own: an annotation or a core keyword.
pub fn asserts_nothing(name: &str) -> bool {
    matches!(kind(name), Some(Annotation | Core))
}

/// Whether `name` bounds one value's size, range or form.
pub fn is_constraint(name: &str) -> bool {
    keyword(name).is_some_and(|k| k.constraint)
}

/// Where `name` holds subschemas, if it does.
pub fn slot(name: &str) -> Option<Slot> {
    keyword(name).and_then(|k| k.slot)
}

/// Whether a larger value of the bound keyword `name` accepts more instances (`maximum`, `maxLength`, ...:
/// `Some(true)`) or fewer (`minimum`, `minLength`, ...: `Some(false)`); `None` for keywords that are not numeric
/// bounds.
pub fn larger_accepts_more(name: &str) -> Option<bool> {
    match name {
        "maximum" | "exclusiveMaximum" | "maxLength" | "maxItems" | "maxProperties" | "maxContains" => Some(true),
        "minimum" | "exclusiveMinimum" | "minLength" | "minItems" | "minProperties" | "minContains" | "multipleOf" => {
            Some(false)
        }
        _ => None,
    }
}

/// The subset question for one constraint keyword, shared by the catalogue's narrowing check ("does the row
/// accept no more than the compiled tool?") and the lock's classification ("does the new schema accept no more
/// than the old?"): whether `name: narrower` accepts no more instances than `name: wider`.
///
/// `Some(true)`: it accepts no more; `Some(false)`: it accepts some instance the other refuses; `None`: keel cannot
/// tell from the two values alone (a changed `pattern` or `format`, a `multipleOf` that does not divide, values of
/// the wrong type).
pub fn constraint_narrows(name: &str, narrower: &Value, wider: &Value) -> Option<bool> {
    if narrower == wider {
        return Some(true);
    }
    if name == "uniqueItems" {
        return match (narrower.as_bool(), wider.as_bool()) {
            (Some(n), Some(w)) => Some(n || !w),
            _ => None,
        };
    }
    if name == "multipleOf" {
        let (n, w) = (narrower.as_f64()?, wider.as_f64()?);
        // Multiples of `n` are multiples of `w` when `n` is itself a multiple of `w`.
        let ratio = n / w;
        return (w > 0.0 && n > 0.0 && (ratio - ratio.round()).abs() < 1e-9).then_some(true);
    }
    let larger_more = larger_accepts_more(name)?;
    let (n, w) = (narrower.as_f64()?, wider.as_f64()?);
    Some(if larger_more { n <= w } else { n >= w })
}

/// The narrowest JSON Schema `type` that `v` is an instance of: `integer` for a number that is whole as
/// serde_json holds it (not a float), else `null`, `boolean`, `number`, `string`, `array` or `object`.
///
/// ```
/// use keel_tools_schema::vocabulary::instance_type;
/// use serde_json::json;
///
/// assert_eq!(instance_type(&json!(5)), "integer");
/// assert_eq!(instance_type(&json!(5.0)), "number");
/// assert_eq!(instance_type(&json!([1])), "array");
/// ```
pub fn instance_type(v: &Value) -> &'static str {
    match v {
        Value::Number(n) if !n.is_f64() => "integer",
        other => json_type(other),
    }
}

/// JSON's own name of a value's kind (RFC 8259's: every number is a `number`), for messages about a value that
/// is not of the kind wanted: `null`, `boolean`, `number`, `string`, `array` or `object`.
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// JSON Schema's equality of two values (`enum`, `const`, `uniqueItems`): numbers by value, exactly (`1` equals
/// `1.0`, and an integer beyond 2^53 is not rounded to the float it is compared with), arrays item by item,
/// objects regardless of key order.
///
/// ```
/// use keel_tools_schema::vocabulary::json_equal;
/// use serde_json::json;
///
/// assert!(json_equal(&json!(1), &json!(1.0)));
/// assert!(json_equal(&json!({"a": 1, "b": [2]}), &json!({"b": [2.0], "a": 1})));
/// assert!(!json_equal(&json!(9007199254740993u64), &json!(9007199254740992.0)));
/// assert!(!json_equal(&json!("1"), &json!(1)));
/// ```
#[inline]
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => number_cmp(x, y) == Ordering::Equal,
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, p)| y.get(k).is_some_and(|q| json_equal(p, q)))
        }
        _ => a == b,
    }
}

/// Compares two JSON numbers exactly (an integer against a float too).
#[inline]
pub(crate) fn number_cmp(a: &Number, b: &Number) -> Ordering {
    match (integer_of(a), integer_of(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(x), None) => int_float_cmp(x, b.as_f64().unwrap_or(0.0)),
        (None, Some(y)) => int_float_cmp(y, a.as_f64().unwrap_or(0.0)).reverse(),
        (None, None) => a.as_f64().unwrap_or(0.0).partial_cmp(&b.as_f64().unwrap_or(0.0)).unwrap_or(Ordering::Equal),
    }
}

/// The number as an integer, when serde_json holds it as one (not a float).
#[inline]
pub(crate) fn integer_of(n: &Number) -> Option<i128> {
    n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from))
}

/// `i` against `f` exactly (`i` is within the `i64`/`u64` range; JSON has no NaN or infinity).
#[inline]
fn int_float_cmp(i: i128, f: f64) -> Ordering {
    const LIMIT: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0; // 2^127
    if f >= LIMIT {
        return Ordering::Less;
    }
    if f < -LIMIT {
        return Ordering::Greater;
    }
    let whole = f.trunc();
    // `whole` is an integer of magnitude below 2^127: exact as i128.
    let w = whole as i128;
    match i.cmp(&w) {
        Ordering::Equal => {
            let fraction = f - whole;
            if fraction > 0.0 {
                Ordering::Less
            } else if fraction < 0.0 {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        }
        other => other,
    }
}

/// The range of a fixed-width integer `format` (schemars writes `int8` ... `uint64`, and `int`/`uint` for
/// `isize`/`usize`): what [`bound_integers`](crate::transform::bound_integers) adds as `minimum` and `maximum` where
/// the schema states none. `None` for any other format.
///
/// ```
/// use keel_tools_schema::vocabulary::integer_format_range;
///
/// assert_eq!(integer_format_range("uint8"), Some((0, 255)));
/// assert_eq!(integer_format_range("int64"), Some((i64::MIN.into(), i64::MAX.into())));
/// assert_eq!(integer_format_range("date"), None);
/// ```
pub fn integer_format_range(format: &str) -> Option<(i128, i128)> {
    Some(match format {
        "int8" => (i8::MIN.into(), i8::MAX.into()),
        "int16" => (i16::MIN.into(), i16::MAX.into()),
        "int32" => (i32::MIN.into(), i32::MAX.into()),
        "int64" | "int" => (i64::MIN.into(), i64::MAX.into()),
        "uint8" => (0, u8::MAX.into()),
        "uint16" => (0, u16::MAX.into()),
        "uint32" => (0, u32::MAX.into()),
        "uint64" | "uint" => (0, u64::MAX.into()),
        _ => return None,
    })
}

/// Whether `v` is an instance of the JSON Schema type `name` (one entry of a `type` keyword): `integer` takes every
/// number with no fractional part (`1.0` too, as drafts 6 and later say), `number` every number; a name that is no
/// type takes nothing.
///
/// ```
/// use keel_tools_schema::vocabulary::is_instance_of;
/// use serde_json::json;
///
/// assert!(is_instance_of(&json!(1.0), "integer"));
/// assert!(is_instance_of(&json!(1), "number"));
/// assert!(!is_instance_of(&json!(1.5), "integer"));
/// assert!(!is_instance_of(&json!("1"), "number"));
/// ```
pub fn is_instance_of(v: &Value, name: &str) -> bool {
    match (name, v) {
        ("integer", Value::Number(n)) => is_integer(n),
        _ => json_type(v) == name,
    }
}

/// An integer per drafts 6 and later: floats with no fractional part count.
#[inline]
pub(crate) fn is_integer(n: &Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// Whether `v` can be a schema (an object or a boolean).
pub fn is_schema(v: &Value) -> bool {
    matches!(v, Value::Object(_) | Value::Bool(_))
}

/// Calls `f(keyword, name, child)` for every direct subschema of `schema`. `name` is the entry name for
/// [`Slot::Named`] keywords.
pub fn for_each_child(schema: &Value, mut f: impl FnMut(&str, Option<&str>, &Value)) {
    let Value::Object(map) = schema else { return };
    for (keyword, value) in map {
        match (slot(keyword), value) {
            (Some(Slot::Single), Value::Array(items)) if keyword == "items" => {
                items.iter().filter(|c| is_schema(c)).for_each(|c| f(keyword, None, c))
            }
            (Some(Slot::Single), c) if is_schema(c) => f(keyword, None, c),
            (Some(Slot::List), Value::Array(items)) => {
                items.iter().filter(|c| is_schema(c)).for_each(|c| f(keyword, None, c))
            }
            (Some(Slot::Named), Value::Object(entries)) => {
                for (name, c) in entries.iter().filter(|(_, c)| is_schema(c)) {
                    f(keyword, Some(name), c)
                }
            }
            _ => {}
        }
    }
}

/// Like [`for_each_child`], mutably.
pub fn for_each_child_mut(schema: &mut Value, mut f: impl FnMut(&str, Option<&str>, &mut Value)) {
    let Value::Object(map) = schema else { return };
    for (keyword, value) in map.iter_mut() {
        match (slot(keyword), value) {
            (Some(Slot::Single), Value::Array(items)) if keyword == "items" => {
                items.iter_mut().filter(|c| is_schema(c)).for_each(|c| f(keyword, None, c))
            }
            (Some(Slot::Single), c) if is_schema(c) => f(keyword, None, c),
            (Some(Slot::List), Value::Array(items)) => {
                items.iter_mut().filter(|c| is_schema(c)).for_each(|c| f(keyword, None, c))
            }
            (Some(Slot::Named), Value::Object(entries)) => {
                for (name, c) in entries.iter_mut().filter(|(_, c)| is_schema(c)) {
                    f(keyword, Some(name), c)
                }
            }
            _ => {}
        }
    }
}

/// The JSON pointer of a local reference (`#`, `#/$defs/Node`), percent-decoded; `None` for anything else
/// (another document, an anchor).
pub fn local_pointer(reference: &str) -> Option<String> {
    let fragment = reference.strip_prefix('#')?;
    if !(fragment.is_empty() || fragment.starts_with('/')) {
        return None;
    }
    Some(percent_decode(fragment))
}

/// The target of the local reference `reference` in `root`, and its (decoded) pointer.
pub fn resolve_ref<'a>(root: &'a Value, reference: &str) -> Option<(&'a Value, String)> {
    let pointer = local_pointer(reference)?;
    root.pointer(&pointer).map(|target| (target, pointer))
}

/// Follows `$ref` chains from `schema` (at most [`MAX_DEPTH`] hops): the first schema that is not a bare
/// reference. An unresolvable reference resolves to the referencing schema itself.
pub fn resolve<'a>(root: &'a Value, mut schema: &'a Value) -> &'a Value {
    for _ in 0..MAX_DEPTH {
        let Some(Value::String(r)) = schema.get("$ref") else { return schema };
        match resolve_ref(root, r) {
            Some((target, _)) => schema = target,
            None => return schema,
        }
    }
    schema
}

/// MCP's extension keyword that mirrors an argument into an HTTP header of the request (`Mcp-Param-<Name>`, SEP-2243),
/// so that a gateway can route on it without reading the body. Written by `#[arg(header = "Region")]`, or on a
/// field of an args struct with `#[schemars(extend("x-mcp-header" = "Region"))]`. Only MCP's rendering keeps it.
pub const MCP_HEADER: &str = "x-mcp-header";

/// Checks the [`MCP_HEADER`] annotations of an input schema as MCP clients do (a client leaves out a tool whose
/// annotations break a rule): each is on a property reached from the root through `properties` alone, is a
/// non-empty HTTP token, unique regardless of case, on a property of type `string`, `integer` or `boolean`.
pub fn check_mcp_headers(input: &Value) -> Result<(), String> {
    fn walk(
        schema: &Value,
        path: &mut Vec<String>,
        on_chain: bool,
        seen: &mut Vec<String>,
        depth: usize,
    ) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Ok(());
        }
        if let Some(header) = schema.get(MCP_HEADER) {
            let at =
                if path.is_empty() { "the schema root".to_owned() } else { format!("property `{}`", path.join(".")) };
            if path.is_empty() {
                return Err(format!("{MCP_HEADER} must annotate a property, not {at}"));
            }
            if !on_chain {
                return Err(format!(
                    "{at}: {MCP_HEADER} must be on a property reached from the root through `properties` alone"
                ));
            }
            let Some(header) = header.as_str().filter(|h| !h.is_empty()) else {
                return Err(format!("{at}: {MCP_HEADER} must be a non-empty string"));
            };
            if !header.chars().all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)) {
                return Err(format!("{at}: {MCP_HEADER} `{header}` is not an HTTP header name"));
            }
            let lower = header.to_ascii_lowercase();
            if seen.contains(&lower) {
                return Err(format!("{at}: {MCP_HEADER} `{header}` is used twice (header names ignore case)"));
            }
            seen.push(lower);
            match schema.get("type").and_then(Value::as_str) {
                Some("string" | "integer" | "boolean") => {}
                other => {
                    return Err(format!(
                        "{at}: {MCP_HEADER} needs a property of type string, integer or boolean (a required one: \
                         an optional property's type also allows null), found {}",
                        other.map_or_else(
                            || schema.get("type").map_or("no type".to_owned(), Value::to_string),
                            str::to_owned
                        )
                    ));
                }
            }
        }
        let mut result = Ok(());
        for_each_child(schema, |keyword, name, child| {
            if result.is_err() {
                return;
            }
            let child_on_chain = on_chain && keyword == "properties";
            path.push(name.unwrap_or(keyword).to_owned());
            result = walk(child, path, child_on_chain, seen, depth + 1);
            path.pop();
        });
        result
    }
    walk(input, &mut Vec::new(), true, &mut Vec::new(), 0)
}

/// Whether any subschema of `schema` carries [`MCP_HEADER`].
pub fn has_mcp_headers(schema: &Value) -> bool {
    fn walk(schema: &Value, depth: usize) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        if schema.get(MCP_HEADER).is_some() {
            return true;
        }
        let mut found = false;
        for_each_child(schema, |_, _, child| found = found || walk(child, depth + 1));
        found
    }
    walk(schema, 0)
}

/// Removes every [`MCP_HEADER`] annotation (an MCP transport's concern, not a model's).
pub fn strip_mcp_headers(schema: &mut Value) {
    fn walk(schema: &mut Value, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        if let Value::Object(map) = schema {
            map.shift_remove(MCP_HEADER);
        }
        for_each_child_mut(schema, |_, _, child| walk(child, depth + 1));
    }
    walk(schema, 0)
}

fn percent_decode(s: &str) -> String {
    if !s.contains('%') {
        return s.to_owned();
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn mcp_header_annotations_follow_the_rules_mcp_clients_check() {
        let ok = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "filter": {"type": "object", "properties": {"shard": {"type": "integer", "x-mcp-header": "Shard"}}},
            "x-mcp-header": {"type": "boolean"},
        }});
        assert_eq!(check_mcp_headers(&ok), Ok(()));
        let cases = [
            (json!({"type": "object", "x-mcp-header": "Root"}), "not the schema root"),
            (json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": ""}}}), "non-empty"),
            (json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A B"}}}), "not an HTTP"),
            (json!({"type": "object", "properties": {"a": {"type": "number", "x-mcp-header": "A"}}}), "found number"),
            (
                json!({"type": "object", "properties": {"a": {"type": ["string", "null"], "x-mcp-header": "A"}}}),
                "optional property",
            ),
            (
                json!({"type": "object", "properties": {
                    "a": {"type": "string", "x-mcp-header": "Dup"},
                    "b": {"type": "string", "x-mcp-header": "dup"},
                }}),
                "used twice",
            ),
            (
                json!({"type": "object", "properties": {"a": {"anyOf": [{"type": "string", "x-mcp-header": "A"}]}}}),
                "through `properties` alone",
            ),
            (
                json!({"type": "object", "$defs": {"D": {"type": "string", "x-mcp-header": "A"}}}),
                "through `properties` alone",
            ),
        ];
        for (schema, expected) in cases {
            let err = check_mcp_headers(&schema).expect_err(&schema.to_string());
            assert!(err.contains(expected), "{schema}: {err}");
        }
    }

    #[test]
    fn mcp_header_annotations_are_found_and_stripped_as_keywords_never_as_property_names() {
        let mut schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "x-mcp-header": {"type": "string"},
        }});
        assert!(has_mcp_headers(&schema));
        strip_mcp_headers(&mut schema);
        assert!(!has_mcp_headers(&schema));
        assert_eq!(
            schema,
            json!({"type": "object", "properties": {"region": {"type": "string"}, "x-mcp-header": {"type": "string"}}})
        );
    }

    #[test]
    fn every_keyword_is_listed_once_and_subschema_holders_are_applicators_or_definitions() {
        for (i, a) in KEYWORDS.iter().enumerate() {
            assert!(KEYWORDS[i + 1..].iter().all(|b| b.name != a.name), "{} twice", a.name);
            if a.slot.is_some() {
                assert!(matches!(a.kind, Applicator | Core) || a.name == "contentSchema", "{}", a.name);
            }
            if a.constraint {
                assert_eq!(a.kind, Validation, "{}", a.name);
            }
        }
        assert!(is_annotation("description") && !is_annotation("minimum") && asserts_nothing("$defs"));
        assert_eq!(kind("x-keel-content"), None);
    }

    #[test]
    fn constraint_narrowing_follows_each_keywords_direction() {
        assert_eq!(constraint_narrows("maxLength", &json!(5), &json!(10)), Some(true));
        assert_eq!(constraint_narrows("maxLength", &json!(10), &json!(5)), Some(false));
        assert_eq!(constraint_narrows("minimum", &json!(3), &json!(0)), Some(true));
        assert_eq!(constraint_narrows("minimum", &json!(-1), &json!(0)), Some(false));
        assert_eq!(constraint_narrows("uniqueItems", &json!(true), &json!(false)), Some(true));
        assert_eq!(constraint_narrows("uniqueItems", &json!(false), &json!(true)), Some(false));
        assert_eq!(constraint_narrows("multipleOf", &json!(4), &json!(2)), Some(true));
        assert_eq!(constraint_narrows("multipleOf", &json!(3), &json!(2)), None);
        assert_eq!(constraint_narrows("pattern", &json!("^a"), &json!("^b")), None);
        assert_eq!(constraint_narrows("pattern", &json!("^a"), &json!("^a")), Some(true));
    }

    #[test]
    fn references_are_percent_decoded_and_followed() {
        let root = json!({"$defs": {"a b": {"$ref": "#/$defs/c"}, "c": {"type": "string"}}, "$ref": "#/$defs/a%20b"});
        assert_eq!(resolve(&root, &root), &json!({"type": "string"}));
        assert_eq!(local_pointer("#/$defs/a%20b").as_deref(), Some("/$defs/a b"));
        assert_eq!(local_pointer("other.json#/x"), None);
        let looping = json!({"$ref": "#"});
        assert_eq!(resolve(&looping, &looping), &looping);
    }

    #[test]
    fn the_visitor_sees_every_direct_subschema() {
        let s = json!({
            "properties": {"a": {}, "b": true}, "items": [{}, {}], "anyOf": [{}], "not": {},
            "$defs": {"D": {}}, "description": "not a schema holder", "enum": [{}]
        });
        let mut seen = Vec::new();
        for_each_child(&s, |k, n, _| seen.push(format!("{k}{}", n.map(|n| format!(".{n}")).unwrap_or_default())));
        seen.sort();
        assert_eq!(seen, ["$defs.D", "anyOf", "items", "items", "not", "properties.a", "properties.b"]);
    }
}
