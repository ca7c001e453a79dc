//! Arguments from a JSON Schema: proptest strategies that generate values a schema accepts ([`arguments`]) and values
//! it must refuse ([`invalid_arguments`]), for the schemas schemars emits for plain Rust types.
//!
//! | schema | what is generated |
//! |---|---|
//! | `type` (one, or a list such as `["string", "null"]`) | a value of one of the types |
//! | `object`: `properties`, `required`, `additionalProperties` (`false`, or a schema for a map), `propertyNames`, `minProperties`/`maxProperties`, `unevaluatedProperties: false` | every required property, each optional one or not, a few map entries |
//! | `array`: `items`, `prefixItems` (tuples), `minItems`/`maxItems`, `uniqueItems` | a short array |
//! | `string`: `minLength`/`maxLength`, `enum`, `const`, `format` (`date-time`, `date`, `time`, `duration`, `email`, `hostname`, `ipv4`, `ipv6`, `uri`, `uri-reference`, `iri`, `uuid`, `json-pointer`, `regex`, ...), `pattern` | a string of mixed characters (ASCII, accents, CJK, an emoji, quotes, a newline), a valid value of the format, a match of the pattern |
//! | `integer`, `number`: `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`, the integer `format`s (`int8` ... `uint64`) | bounds, zero, small and large values |
//! | `boolean`, `null` | either |
//! | `anyOf`, `oneOf` | one branch (for `oneOf`, only values no other branch accepts) |
//! | `allOf`, and objects spread over `allOf`/`oneOf`/`anyOf` (`#[serde(flatten)]`) | the merged object |
//! | `$ref` into `$defs` (or `definitions`) | the definition, recursion cut at a depth |
//! | `true` (a `serde_json::Value`) | a small JSON value |
//!
//! Everything else (`not`, `if`/`then`/`else`, `patternProperties`, `dependentRequired`, `contains`, remote `$ref`s, a
//! pattern the regex generator cannot handle, ...) is [`Unsupported`]: the caller skips the schema and says why,
//! rather than generating values that might be wrong. Keywords that assert nothing (annotations such as
//! `description` or `contentMediaType`, `$defs`, `x-...` extensions) are ignored, as the validator ignores them.
//!
//! Invalid values are a valid value with one thing broken where the schema's meaning is certain: a wrong type, a
//! missing required property, an unknown property where objects are closed, a value outside a bound, a length or
//! an `enum`. Nothing is broken below an `anyOf`/`oneOf` branch (the value might match another branch), and no
//! property is broken into `null` or its stated `default` (the executor's canonical form reads both as "absent").

use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::strategy::{Union, ValueTree};
use serde_json::{Map, Number, Value, json};

use crate::imports::{CompiledSchema, vocabulary};

/// A schema the generator does not understand, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// The JSON pointer of the part of the schema (`""` for the root).
    pub pointer: String,
    /// What the generator cannot do there.
    pub reason: String,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Other,
    /// A pattern the regex generator cannot produce matches for.
    Pattern,
    /// Recursion that does not end within the depth cap.
    TooDeep,
}

impl Unsupported {
    fn new(pointer: &str, reason: impl Into<String>) -> Unsupported {
        Unsupported { pointer: pointer.to_owned(), reason: reason.into(), kind: Kind::Other }
    }

    fn with_kind(mut self, kind: Kind) -> Unsupported {
        self.kind = kind;
        self
    }

    /// Whether the reason is a `pattern` the regex generator cannot produce matches for (the rest of the schema
    /// may still be understood).
    pub fn is_pattern(&self) -> bool {
        self.kind == Kind::Pattern
    }

    fn too_deep(&self) -> bool {
        self.kind == Kind::TooDeep
    }
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pointer.is_empty() {
            write!(f, "at the schema's root: {}", self.reason)
        } else {
            write!(f, "at `{}`: {}", self.pointer, self.reason)
        }
    }
}

impl std::error::Error for Unsupported {}

/// A value a schema must refuse, and what was broken to get it.
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid {
    /// The value.
    pub value: Value,
    /// What is wrong with it, e.g. ``/limit: "x" where the schema wants integer``.
    pub broken: String,
}

/// A strategy of values `schema` accepts. See the [module docs](self) for what is understood.
///
/// ```
/// use proptest::strategy::{Strategy, ValueTree};
/// use proptest::test_runner::TestRunner;
///
/// let schema = serde_json::json!({
///     "type": "object",
///     "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9}},
///     "required": ["n"],
///     "additionalProperties": false
/// });
/// let strategy = keel_tools_testkit::schema::arguments(&schema).unwrap();
/// let value = strategy.new_tree(&mut TestRunner::deterministic()).unwrap().current();
/// assert!((1..=9).contains(&value["n"].as_i64().unwrap()));
/// ```
pub fn arguments(schema: &Value) -> Result<BoxedStrategy<Value>, Unsupported> {
    arguments_with_notes(schema).map(|(s, _)| s)
}

/// [`arguments`], with a note for each part of the schema left out of the values: an optional property or an
/// `anyOf`/`oneOf` branch that cannot be generated (the values stay valid; they only cover less).
pub fn arguments_with_notes(schema: &Value) -> Result<(BoxedStrategy<Value>, Vec<String>), Unsupported> {
    let generator = Gen::new(schema, Mode::Exact);
    let strategy = generator.valid(schema, "", At::ROOT)?;
    Ok((strategy, generator.notes.into_inner()))
}

/// A strategy of values `schema` must refuse, each with what was broken; `Ok(None)` when nothing can be broken
/// with certainty (a schema that accepts anything). Where a part of the schema has no valid generator (a pattern
/// the regex generator cannot produce), the rest of the value is generated leniently: it is refused all the same.
pub fn invalid_arguments(schema: &Value) -> Result<Option<BoxedStrategy<Invalid>>, Unsupported> {
    let generator = Gen::new(schema, Mode::Lenient);
    let sites = generator.invalid(schema, "", "", At::ROOT, None)?;
    if sites.is_empty() {
        return Ok(None);
    }
    let union = Union::new(sites).prop_map(|(value, broken)| Invalid { value, broken });
    Ok(Some(union.boxed()))
}

/// [`arguments_with_notes`], or when the schema holds a pattern that cannot be generated, values that ignore the
/// pattern (with a note saying so).
pub(crate) fn lenient_arguments(schema: &Value) -> Result<(BoxedStrategy<Value>, Vec<String>), Unsupported> {
    arguments_with_notes(schema).or_else(|e| {
        if e.is_pattern() {
            let strategy = Gen::new(schema, Mode::Lenient).valid(schema, "", At::ROOT)?;
            Ok((strategy, vec![format!("values may not match a pattern: {e}")]))
        } else {
            Err(e)
        }
    })
}

type S = BoxedStrategy<Value>;
type Broken = BoxedStrategy<(Value, String)>;
type R<T> = Result<T, Unsupported>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Only values the schema accepts.
    Exact,
    /// Patterns and unknown keywords ignored: for the bases of invalid values, which are refused anyway.
    Lenient,
}

/// How deep a node is: `$ref`s followed and nesting.
#[derive(Debug, Clone, Copy)]
struct At {
    refs: usize,
    depth: usize,
}

/// Past these, values are kept minimal (no optional property, shortest arrays, non-recursive branches).
const SOFT_REFS: usize = 3;
const SOFT_DEPTH: usize = 10;
/// Past these, a branch is given up (a recursive type must end before).
const HARD_REFS: usize = 8;
const HARD_DEPTH: usize = 32;
/// The most strategies built for one schema.
const BUDGET: usize = 20_000;
/// The longest string and the most items (or properties) a schema may require before it is not generated for.
const MAX_LENGTH: usize = 10_000;
const MAX_ITEMS: usize = 1_000;
/// The name of the property added where objects are closed.
const UNKNOWN: &str = "testkit_unknown_property";

impl At {
    const ROOT: At = At { refs: 0, depth: 0 };
    fn soft(self) -> bool {
        self.refs >= SOFT_REFS || self.depth >= SOFT_DEPTH
    }
    fn hard(self) -> bool {
        self.refs >= HARD_REFS || self.depth >= HARD_DEPTH
    }
    fn child(self) -> At {
        At { refs: self.refs, depth: self.depth + 1 }
    }
    fn through_ref(self) -> At {
        At { refs: self.refs + 1, depth: self.depth + 1 }
    }
}

/// The assertions this generator understands. A schema with any other assertion (`is_assertion`) is
/// [`Unsupported`].
const UNDERSTOOD: &[&str] = &[
    "$ref",
    "type",
    "enum",
    "const",
    "allOf",
    "anyOf",
    "oneOf",
    "properties",
    "required",
    "additionalProperties",
    "unevaluatedProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
];

/// The formats the validator asserts, with a generator here.
const FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "iri",
    "uri-reference",
    "iri-reference",
    "uri-template",
    "uuid",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

struct Gen<'a> {
    root: &'a Value,
    mode: Mode,
    built: Cell<usize>,
    /// `$ref`s followed so far: to tell branches that recurse from those that do not.
    refs_followed: Cell<usize>,
    /// The parts left out of the values, and why.
    notes: RefCell<Vec<String>>,
}

fn join(pointer: &str, token: &str) -> String {
    format!("{pointer}/{}", token.replace('~', "~0").replace('/', "~1"))
}

/// `` `/a/b` `` or `the arguments` for the root.
fn show(instance: &str) -> String {
    if instance.is_empty() { "the arguments".to_owned() } else { format!("`{instance}`") }
}

/// Whether `key` is a keyword that can refuse a value: a validation keyword, an applicator or a reference. Annotations
/// (the content keywords among them, which draft 2020-12 does not assert), core keywords and keywords outside the
/// vocabulary (`x-...`, OpenAPI's `nullable`) are ignored, as the validator ignores them.
fn is_assertion(key: &str) -> bool {
    vocabulary::kind(key).is_some() && !vocabulary::asserts_nothing(key)
}

/// Whether `m` holds constraining keywords other than `except`.
fn asserts_beside(m: &Map<String, Value>, except: &[&str]) -> bool {
    m.keys().any(|k| is_assertion(k) && !except.contains(&k.as_str()))
}

fn as_i128(n: &Number) -> Option<i128> {
    n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from))
}

fn int_value(v: i128) -> Value {
    if let Ok(i) = i64::try_from(v) {
        Value::from(i)
    } else if let Ok(u) = u64::try_from(v) {
        Value::from(u)
    } else {
        // Beyond every 64-bit integer: an integral float.
        Number::from_f64(v as f64).map_or(Value::Null, Value::Number)
    }
}

fn float_value(v: f64) -> Option<Value> {
    Number::from_f64(v).map(Value::Number)
}

/// The JSON types a value of `type` may have; `None` without `type`.
fn types_of(m: &Map<String, Value>, pointer: &str) -> R<Option<Vec<String>>> {
    match m.get("type") {
        None => Ok(None),
        Some(Value::String(t)) => Ok(Some(vec![t.clone()])),
        Some(Value::Array(ts)) => ts
            .iter()
            .map(|t| {
                t.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| Unsupported::new(pointer, "a `type` list that holds a non-string"))
            })
            .collect::<R<Vec<_>>>()
            .map(Some),
        Some(_) => Err(Unsupported::new(pointer, "a `type` that is neither a string nor a list")),
    }
}

/// The types a schema without `type` describes, from its keywords; empty when it describes any value.
fn inferred_types(m: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    let has = |keys: &[&str]| keys.iter().any(|k| m.contains_key(*k));
    if has(&[
        "properties",
        "required",
        "additionalProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "unevaluatedProperties",
    ]) {
        out.push("object".to_owned());
    }
    if has(&["items", "prefixItems", "minItems", "maxItems", "uniqueItems"]) {
        out.push("array".to_owned());
    }
    if has(&["minLength", "maxLength", "pattern"])
        || m.get("format").and_then(Value::as_str).is_some_and(|f| FORMATS.contains(&f))
    {
        out.push("string".to_owned());
    }
    if has(&["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]) {
        out.push("number".to_owned());
    }
    out
}

/// Whether `v` is of one of `types`.
fn type_fits(types: &[String], v: &Value) -> bool {
    types.iter().any(|t| vocabulary::is_instance_of(v, t))
}

/// The bounds of an integer schema, as `[lo, hi]` within what a JSON number serde reads holds.
fn integer_bounds(m: &Map<String, Value>) -> (i128, i128) {
    let (mut lo, mut hi) = (i128::from(i64::MIN), i128::from(u64::MAX));
    let num = |k: &str| m.get(k).and_then(Value::as_number);
    let floor =
        |n: &Number| as_i128(n).unwrap_or_else(|| n.as_f64().map_or(0, |f| f.floor().clamp(-1e30, 1e30) as i128));
    let ceil = |n: &Number| as_i128(n).unwrap_or_else(|| n.as_f64().map_or(0, |f| f.ceil().clamp(-1e30, 1e30) as i128));
    let explicit_min = num("minimum").is_some();
    let explicit_max = num("maximum").is_some();
    if let Some(n) = num("minimum") {
        lo = lo.max(ceil(n));
    }
    if let Some(n) = num("exclusiveMinimum") {
        lo = lo.max(floor(n) + 1);
    }
    if let Some(n) = num("maximum") {
        hi = hi.min(floor(n));
    }
    if let Some(n) = num("exclusiveMaximum") {
        hi = hi.min(ceil(n) - 1);
    }
    if let Some((flo, fhi)) = m.get("format").and_then(Value::as_str).and_then(vocabulary::integer_format_range) {
        // The executor adds a format's range only where no bound is stated.
        if !explicit_min {
            lo = lo.max(flo);
        }
        if !explicit_max {
            hi = hi.min(fhi);
        }
    }
    (lo, hi)
}

/// Values spread over `[lo, hi]`: the bounds, small values, any value; each shrinks towards zero (or the bound
/// nearest to it) by binary search, whichever way it was drawn.
fn spread_i128(lo: i128, hi: i128) -> BoxedStrategy<i128> {
    Spread { lo, hi }.boxed()
}

#[derive(Debug, Clone, Copy)]
struct Spread {
    lo: i128,
    hi: i128,
}

impl Strategy for Spread {
    type Tree = Toward;
    type Value = i128;

    fn new_tree(&self, runner: &mut proptest::test_runner::TestRunner) -> proptest::strategy::NewTree<Self> {
        let (lo, hi) = (self.lo, self.hi);
        let target = 0i128.clamp(lo, hi);
        let (slo, shi) = (lo.max(target - 100), hi.min(target + 100));
        let value = match (0u8..10).new_tree(runner)?.current() {
            0 => lo,
            1 => hi,
            2..=5 => (slo..=shi).new_tree(runner)?.current(),
            _ => (lo..=hi).new_tree(runner)?.current(),
        };
        Ok(Toward::new(value, target))
    }
}

/// A binary search from a value towards a target.
#[derive(Debug, Clone, Copy)]
struct Toward {
    target: i128,
    negative: bool,
    /// The distance from the target: the current one, and the bounds of the search.
    curr: u128,
    lo: u128,
    hi: u128,
}

impl Toward {
    fn new(value: i128, target: i128) -> Toward {
        let distance = value.abs_diff(target);
        Toward { target, negative: value < target, curr: distance, lo: 0, hi: distance }
    }

    fn reposition(&mut self) -> bool {
        let mid = self.lo + (self.hi - self.lo) / 2;
        if mid == self.curr {
            false
        } else {
            self.curr = mid;
            true
        }
    }
}

impl ValueTree for Toward {
    type Value = i128;

    fn current(&self) -> i128 {
        // The distance fits: both ends lie within [i64::MIN, u64::MAX].
        let d = self.curr as i128;
        if self.negative { self.target - d } else { self.target + d }
    }

    fn simplify(&mut self) -> bool {
        if self.hi <= self.lo {
            return false;
        }
        self.hi = self.curr;
        self.reposition()
    }

    fn complicate(&mut self) -> bool {
        if self.hi <= self.lo {
            return false;
        }
        self.lo = self.curr + 1;
        self.reposition()
    }
}

fn chars() -> BoxedStrategy<char> {
    prop_oneof![
        10 => proptest::char::range('a', 'z'),
        2 => proptest::char::range('A', 'Z'),
        2 => proptest::char::range('0', '9'),
        2 => proptest::sample::select(vec![' ', '-', '_', '.', '/', ':', '"', '\'', '\\', '\n', '\t', '%', '<', '&']),
        1 => proptest::sample::select(vec!['é', 'ß', 'ü', 'ø', 'ł', 'Ж', 'λ', '日', '本', '🦀', '\u{200b}']),
    ]
    .boxed()
}

fn string_of(lo: usize, hi: usize) -> BoxedStrategy<String> {
    proptest::collection::vec(chars(), lo..=hi).prop_map(String::from_iter).boxed()
}

fn lower(lo: usize, hi: usize) -> BoxedStrategy<String> {
    proptest::collection::vec(proptest::char::range('a', 'z'), lo..=hi).prop_map(String::from_iter).boxed()
}

fn hex(n: usize) -> BoxedStrategy<String> {
    proptest::collection::vec(proptest::sample::select(b"0123456789abcdef".to_vec()), n)
        .prop_map(|v| String::from_utf8(v).unwrap_or_default())
        .boxed()
}

/// Valid values of a format the validator asserts.
fn format_strategy(format: &str) -> BoxedStrategy<String> {
    let date = (1970u32..=2099, 1u32..=12, 1u32..=28).prop_map(|(y, m, d)| format!("{y:04}-{m:02}-{d:02}"));
    let time = (0u32..=23, 0u32..=59, 0u32..=59, proptest::sample::select(vec!["Z", "+00:00", "+02:00", "-05:30"]))
        .prop_map(|(h, m, s, z)| format!("{h:02}:{m:02}:{s:02}{z}"));
    let host = (lower(1, 8), lower(0, 6), proptest::sample::select(vec!["com", "org", "net", "io", "example"]))
        .prop_map(|(a, b, tld)| if b.is_empty() { format!("{a}.{tld}") } else { format!("{a}.{b}.{tld}") });
    match format {
        "date-time" => (date, time).prop_map(|(d, t)| format!("{d}T{t}")).boxed(),
        "date" => date.boxed(),
        "time" => time.boxed(),
        "duration" => (1u32..=400, 0u32..=23, 0usize..4)
            .prop_map(|(n, h, form)| match form {
                0 => format!("P{n}D"),
                1 => format!("P{n}W"),
                2 => format!("PT{h}H{n}M"),
                _ => format!("P{n}DT{h}H"),
            })
            .boxed(),
        "email" | "idn-email" => (lower(1, 10), host).prop_map(|(local, host)| format!("{local}@{host}")).boxed(),
        "hostname" | "idn-hostname" => host.boxed(),
        "ipv4" => proptest::collection::vec(0u8..=255, 4)
            .prop_map(|o| o.iter().map(u8::to_string).collect::<Vec<_>>().join("."))
            .boxed(),
        "ipv6" => proptest::collection::vec(0u16..=0xffff, 8)
            .prop_map(|g| g.iter().map(|x| format!("{x:x}")).collect::<Vec<_>>().join(":"))
            .boxed(),
        "uri" | "iri" => (host, lower(0, 8)).prop_map(|(h, p)| format!("https://{h}/{p}")).boxed(),
        "uri-reference" | "iri-reference" => prop_oneof![
            (host, lower(0, 8)).prop_map(|(h, p)| format!("https://{h}/{p}")),
            lower(0, 8).prop_map(|p| format!("/{p}")),
        ]
        .boxed(),
        "uri-template" => (host, lower(1, 6)).prop_map(|(h, v)| format!("https://{h}/{{{v}}}")).boxed(),
        "uuid" => (hex(8), hex(4), hex(3), hex(3), hex(12), proptest::sample::select(vec!['8', '9', 'a', 'b']))
            .prop_map(|(a, b, c, d, e, variant)| format!("{a}-{b}-4{c}-{variant}{d}-{e}"))
            .boxed(),
        "json-pointer" => proptest::collection::vec(lower(0, 5), 0..=3)
            .prop_map(|tokens| tokens.iter().map(|t| format!("/{t}")).collect())
            .boxed(),
        "relative-json-pointer" => (0u32..=3, proptest::collection::vec(lower(1, 5), 0..=2))
            .prop_map(|(n, tokens)| format!("{n}{}", tokens.iter().map(|t| format!("/{t}")).collect::<String>()))
            .boxed(),
        _ /* "regex" */ => proptest::sample::select(vec!["a+", "^[a-z]*$", "x|y", "[0-9]{2,4}", ".*"])
            .prop_map(str::to_owned)
            .boxed(),
    }
}

/// An ECMA-262 pattern (JSON Schema's dialect, searched anywhere in the string) as a Rust regex whose full matches
/// the generator produces: anchors dropped, `\d`, `\w`, `\s` narrowed to ASCII (a subset of the ECMA classes).
fn pattern_to_rust(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    let mut class_start = false;
    while let Some(c) = chars.next() {
        let at_class_start = std::mem::take(&mut class_start);
        match c {
            '\\' => {
                let Some(next) = chars.next() else {
                    out.push('\\');
                    break;
                };
                let class = match next {
                    'd' => Some("0-9"),
                    'w' => Some("A-Za-z0-9_"),
                    's' => Some(" \\t\\n\\r\\x0B\\x0C"),
                    _ => None,
                };
                match class {
                    Some(set) if in_class => out.push_str(set),
                    Some(set) => {
                        out.push('[');
                        out.push_str(set);
                        out.push(']');
                    }
                    None => {
                        out.push('\\');
                        out.push(next);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                class_start = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
            }
            ']' if in_class && !at_class_start => {
                in_class = false;
                out.push(']');
            }
            '^' | '$' if !in_class => {}
            _ => out.push(c),
        }
    }
    out
}

impl<'a> Gen<'a> {
    fn new(root: &'a Value, mode: Mode) -> Gen<'a> {
        Gen { root, mode, built: Cell::new(0), refs_followed: Cell::new(0), notes: RefCell::new(Vec::new()) }
    }

    /// Records that a part is left out of the values (an optional property, a union branch).
    fn leave_out(&self, what: String, why: &Unsupported) {
        if !why.too_deep() && self.mode == Mode::Exact {
            self.notes.borrow_mut().push(format!("{what} is left out: {why}"));
        }
    }

    fn tick(&self, pointer: &str) -> R<()> {
        self.built.set(self.built.get() + 1);
        if self.built.get() > BUDGET {
            return Err(Unsupported::new(pointer, "the schema is too large to generate values for"));
        }
        Ok(())
    }

    /// The schema a local `$ref` names, and its pointer.
    fn resolve(&self, reference: &Value, pointer: &str) -> R<(&'a Value, String)> {
        let reference = reference.as_str().ok_or_else(|| Unsupported::new(pointer, "a `$ref` that is not a string"))?;
        vocabulary::resolve_ref(self.root, reference).ok_or_else(|| {
            let why = if !reference.starts_with('#') {
                "is not local to the schema"
            } else if vocabulary::local_pointer(reference).is_none() {
                "names an anchor"
            } else {
                "leads nowhere"
            };
            Unsupported::new(pointer, format!("the `$ref` {reference:?} {why}"))
        })
    }

    /// Follows a chain of `$ref`-only schemas.
    fn resolve_chain(&self, mut schema: &'a Value, mut pointer: String) -> R<(&'a Value, String)> {
        for _ in 0..32 {
            match schema {
                Value::Object(m) if m.contains_key("$ref") && !asserts_beside(m, &["$ref"]) => {
                    let (next, p) = self.resolve(&m["$ref"], &pointer)?;
                    schema = next;
                    pointer = p;
                }
                _ => return Ok((schema, pointer)),
            }
        }
        Err(Unsupported::new(&pointer, "a cycle of `$ref`s"))
    }

    fn check_keywords(&self, m: &Map<String, Value>, pointer: &str) -> R<()> {
        if self.mode == Mode::Lenient {
            return Ok(());
        }
        if let Some(k) = m.keys().find(|k| is_assertion(k) && !UNDERSTOOD.contains(&k.as_str())) {
            return Err(Unsupported::new(pointer, format!("the keyword `{k}` is not understood by the generator")));
        }
        if let Some(u) = m.get("unevaluatedProperties")
            && u != &Value::Bool(false)
        {
            return Err(Unsupported::new(pointer, "`unevaluatedProperties` other than `false`"));
        }
        if let Some(Value::Array(_)) = m.get("items") {
            return Err(Unsupported::new(pointer, "a draft-07 tuple (`items` as a list)"));
        }
        Ok(())
    }

    /// The schema with the root's definitions, so that its `$ref`s resolve when it is compiled alone.
    fn with_definitions(&self, schema: &Value) -> Value {
        let mut out = schema.clone();
        if let (Value::Object(out), Value::Object(root)) = (&mut out, self.root) {
            for key in ["$defs", "definitions"] {
                if let Some(defs) = root.get(key)
                    && !out.contains_key(key)
                {
                    out.insert(key.to_owned(), defs.clone());
                }
            }
        }
        out
    }

    fn compile(&self, schema: &Value, pointer: &str) -> R<CompiledSchema> {
        CompiledSchema::compile(&self.with_definitions(schema))
            .map_err(|e| Unsupported::new(pointer, format!("the schema does not compile: {e}")))
    }

    // -------------------------------------------------------------------------------------------------------------
    // Valid values
    // -------------------------------------------------------------------------------------------------------------

    fn valid(&self, schema: &'a Value, pointer: &str, at: At) -> R<S> {
        self.tick(pointer)?;
        if at.hard() {
            return Err(
                Unsupported::new(pointer, "the schema nests (or recurses) too deep to end").with_kind(Kind::TooDeep)
            );
        }
        let m = match schema {
            Value::Bool(true) => return Ok(any_value(at)),
            Value::Bool(false) => return Err(Unsupported::new(pointer, "the schema `false` accepts no value")),
            Value::Object(m) => m,
            _ => return Err(Unsupported::new(pointer, "not a schema")),
        };
        self.check_keywords(m, pointer)?;
        if let Some(reference) = m.get("$ref") {
            if asserts_beside(m, &["$ref"]) {
                return self.composed(m, pointer, at);
            }
            let (target, target_pointer) = self.resolve(reference, pointer)?;
            self.refs_followed.set(self.refs_followed.get() + 1);
            return self.valid(target, &target_pointer, at.through_ref());
        }
        if ["allOf", "anyOf", "oneOf"].iter().any(|k| m.contains_key(*k)) {
            return self.composed(m, pointer, at);
        }
        self.typed(m, pointer, at)
    }

    fn composed(&self, m: &'a Map<String, Value>, pointer: &str, at: At) -> R<S> {
        let list = |k: &str| -> R<Option<&'a Vec<Value>>> {
            match m.get(k) {
                None => Ok(None),
                Some(Value::Array(a)) if !a.is_empty() => Ok(Some(a)),
                Some(_) => Err(Unsupported::new(pointer, format!("`{k}` is not a non-empty list"))),
            }
        };
        let all_of = list("allOf")?;
        let any_of = list("anyOf")?;
        let one_of = list("oneOf")?;
        let own = asserts_beside(m, &["allOf", "anyOf", "oneOf"]);
        match (own, all_of, any_of, one_of) {
            (false, Some(parts), None, None) if parts.len() == 1 => {
                self.valid(&parts[0], &format!("{pointer}/allOf/0"), at.child())
            }
            (false, None, Some(branches), None) => self.union(branches, &format!("{pointer}/anyOf"), at, false),
            (false, None, None, Some(branches)) => self.union(branches, &format!("{pointer}/oneOf"), at, true),
            _ => self.merged_object(m, pointer, at, all_of, any_of.or(one_of), one_of.is_some()),
        }
    }

    /// One branch of `branches`; for `oneOf`, only values no other branch accepts.
    fn union(&self, branches: &'a [Value], pointer: &str, at: At, exclusive: bool) -> R<S> {
        let mut built: Vec<(usize, S, bool)> = Vec::new();
        let mut errors = Vec::new();
        for (i, branch) in branches.iter().enumerate() {
            let before = self.refs_followed.get();
            match self.valid(branch, &format!("{pointer}/{i}"), at.child()) {
                Ok(s) => built.push((i, s, self.refs_followed.get() == before)),
                Err(e) => errors.push((i, e)),
            }
        }
        if built.is_empty() {
            return Err(errors.into_iter().next().map_or_else(|| Unsupported::new(pointer, "no branch"), |(_, e)| e));
        }
        for (i, e) in &errors {
            self.leave_out(format!("the branch `{pointer}/{i}`"), e);
        }
        if at.soft() && built.iter().any(|(_, _, flat)| *flat) {
            built.retain(|(_, _, flat)| *flat);
        }
        let strategies: Vec<S> = if exclusive && branches.len() > 1 {
            let validators = branches
                .iter()
                .enumerate()
                .map(|(i, b)| self.compile(b, &format!("{pointer}/{i}")))
                .collect::<R<Vec<_>>>()?;
            let validators = Arc::new(validators);
            built
                .into_iter()
                .map(|(i, s, _)| {
                    let validators = Arc::clone(&validators);
                    s.prop_filter("a oneOf value must match exactly one branch", move |v| {
                        validators.iter().enumerate().all(|(j, c)| j == i || !c.is_valid(v))
                    })
                    .boxed()
                })
                .collect()
        } else {
            built.into_iter().map(|(_, s, _)| s).collect()
        };
        Ok(Union::new(strategies).boxed())
    }

    /// An object whose properties are spread over the node itself, `allOf` parts and one of `branches`.
    fn merged_object(
        &self,
        m: &'a Map<String, Value>,
        pointer: &str,
        at: At,
        all_of: Option<&'a Vec<Value>>,
        branches: Option<&'a Vec<Value>>,
        exclusive: bool,
    ) -> R<S> {
        let not_merge = || Unsupported::new(pointer, "a composition that is not a merge of object schemas");
        let mut parts: Vec<(&'a Map<String, Value>, String)> = vec![(m, pointer.to_owned())];
        if let Some(reference) = m.get("$ref") {
            let (target, p) = self.resolve(reference, pointer)?;
            let (target, p) = self.resolve_chain(target, p)?;
            parts.push((target.as_object().ok_or_else(not_merge)?, p));
        }
        for (i, part) in all_of.into_iter().flatten().enumerate() {
            let (part, p) = self.resolve_chain(part, format!("{pointer}/allOf/{i}"))?;
            parts.push((part.as_object().ok_or_else(not_merge)?, p));
        }
        let mut alternatives: Vec<Option<(&'a Map<String, Value>, String)>> = vec![None];
        if let Some(branches) = branches {
            let keyword = if exclusive { "oneOf" } else { "anyOf" };
            alternatives = branches
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    let (b, p) = self.resolve_chain(b, format!("{pointer}/{keyword}/{i}"))?;
                    Ok(Some((b.as_object().ok_or_else(not_merge)?, p)))
                })
                .collect::<R<_>>()?;
        }
        let mut strategies = Vec::new();
        let mut errors = Vec::new();
        for alternative in &alternatives {
            let mut all = parts.clone();
            all.extend(alternative.clone());
            match self.merge(&all, pointer).and_then(|spec| self.object(&spec, pointer, at)) {
                Ok(s) => strategies.push(s),
                Err(e) => errors.push((alternative.as_ref().map(|(_, p)| p.clone()), e)),
            }
        }
        if strategies.is_empty() {
            return Err(errors.into_iter().next().map_or_else(not_merge, |(_, e)| e));
        }
        for (branch, e) in &errors {
            self.leave_out(format!("the branch `{}`", branch.as_deref().unwrap_or(pointer)), e);
        }
        let union = Union::new(strategies).boxed();
        if exclusive && let Some(branches) = branches {
            let keyword = format!("{pointer}/oneOf");
            let validators = Arc::new(
                branches
                    .iter()
                    .enumerate()
                    .map(|(i, b)| self.compile(b, &format!("{keyword}/{i}")))
                    .collect::<R<Vec<_>>>()?,
            );
            return Ok(union
                .prop_filter("a oneOf value must match exactly one branch", move |v| {
                    validators.iter().filter(|c| c.is_valid(v)).count() == 1
                })
                .boxed());
        }
        Ok(union)
    }

    /// One object description from object schemas that all apply.
    fn merge(&self, parts: &[(&'a Map<String, Value>, String)], pointer: &str) -> R<ObjectSpec<'a>> {
        const OBJECT_KEYS: &[&str] = &[
            "type",
            "properties",
            "required",
            "additionalProperties",
            "unevaluatedProperties",
            "$ref",
            "allOf",
            "anyOf",
            "oneOf",
        ];
        let mut spec = ObjectSpec::default();
        let mut closed_parts = 0;
        for (part, p) in parts {
            if let Some(k) = part.keys().find(|k| is_assertion(k) && !OBJECT_KEYS.contains(&k.as_str())) {
                return Err(Unsupported::new(p, format!("`{k}` in a merged object schema")));
            }
            self.check_keywords(part, p)?;
            if let Some(t) = part.get("type")
                && t != "object"
            {
                return Err(Unsupported::new(p, "a merged schema that is not an object schema"));
            }
            let nested = part.contains_key("allOf") || part.contains_key("anyOf") || part.contains_key("oneOf");
            if nested && !std::ptr::eq(*part, parts[0].0) {
                return Err(Unsupported::new(p, "a composition nested in a merged object schema"));
            }
            if let Some(Value::Object(props)) = part.get("properties") {
                for (name, schema) in props {
                    match spec.properties.iter().find(|(n, _, _)| n == name) {
                        Some((_, existing, _)) if *existing == schema => {}
                        Some(_) => {
                            return Err(Unsupported::new(
                                p,
                                format!("the property `{name}` is declared twice, differently"),
                            ));
                        }
                        None => spec.properties.push((name.clone(), schema, join(&format!("{p}/properties"), name))),
                    }
                }
            }
            for r in part.get("required").and_then(Value::as_array).into_iter().flatten() {
                if let Some(r) = r.as_str()
                    && !spec.required.iter().any(|x| x == r)
                {
                    spec.required.push(r.to_owned());
                }
            }
            if part.contains_key("additionalProperties") {
                closed_parts += 1;
            }
        }
        if closed_parts > 0 && parts.len() > 1 {
            return Err(Unsupported::new(pointer, "`additionalProperties` in an object merged from several schemas"));
        }
        spec.additional = Additional::Closed;
        Ok(spec)
    }

    fn typed(&self, m: &'a Map<String, Value>, pointer: &str, at: At) -> R<S> {
        let declared = types_of(m, pointer)?;
        if let Some(c) = m.get("const") {
            return Ok(Just(c.clone()).boxed());
        }
        if let Some(e) = m.get("enum") {
            let Value::Array(values) = e else { return Err(Unsupported::new(pointer, "an `enum` that is not a list")) };
            let mut candidates: Vec<Value> =
                values.iter().filter(|v| declared.as_ref().is_none_or(|t| type_fits(t, v))).cloned().collect();
            if asserts_beside(m, &["enum", "type"]) && !candidates.is_empty() {
                let check = self.compile(&Value::Object(m.clone()), pointer)?;
                candidates.retain(|v| check.is_valid(v));
            }
            if candidates.is_empty() {
                return Err(Unsupported::new(pointer, "no value of the `enum` fits the rest of the schema"));
            }
            return Ok(proptest::sample::select(candidates).boxed());
        }
        let types = declared.unwrap_or_else(|| inferred_types(m));
        if types.is_empty() {
            return Ok(any_value(at));
        }
        let mut strategies = Vec::new();
        for t in &types {
            strategies.push(match t.as_str() {
                "null" => Just(Value::Null).boxed(),
                "boolean" => any::<bool>().prop_map(Value::Bool).boxed(),
                "integer" => self.integer(m, pointer)?,
                "number" => self.number(m, pointer)?,
                "string" => self.string(m, pointer)?,
                "array" => self.array(m, pointer, at)?,
                "object" => self.object(&self.object_spec(m, pointer)?, pointer, at)?,
                other => return Err(Unsupported::new(pointer, format!("the type `{other}`"))),
            });
        }
        Ok(if strategies.len() == 1 { strategies.remove(0) } else { Union::new(strategies).boxed() })
    }

    fn integer(&self, m: &Map<String, Value>, pointer: &str) -> R<S> {
        let (lo, hi) = integer_bounds(m);
        if lo > hi {
            return Err(Unsupported::new(pointer, "integer bounds that no value meets"));
        }
        match m.get("multipleOf").and_then(Value::as_number) {
            None => Ok(spread_i128(lo, hi).prop_map(int_value).boxed()),
            Some(step) => match as_i128(step) {
                Some(step) if step > 0 => {
                    let (klo, khi) = (div_ceil(lo, step), hi.div_euclid(step));
                    if klo > khi {
                        return Err(Unsupported::new(pointer, "no multiple of `multipleOf` within the bounds"));
                    }
                    Ok(spread_i128(klo, khi).prop_map(move |k| int_value(k * step)).boxed())
                }
                _ => {
                    let check = self.compile(&json!({"multipleOf": step}), pointer)?;
                    Ok(spread_i128(lo, hi)
                        .prop_map(int_value)
                        .prop_filter("a multiple of `multipleOf`", move |v| check.is_valid(v))
                        .boxed())
                }
            },
        }
    }

    fn number(&self, m: &Map<String, Value>, pointer: &str) -> R<S> {
        let num = |k: &str| m.get(k).and_then(Value::as_f64);
        // A `float` (an `f32`) holds less than a JSON number.
        let cap = if m.get("format").and_then(Value::as_str) == Some("float") { f64::from(f32::MAX) } else { f64::MAX };
        let mut lo = -cap;
        let mut hi = cap;
        if let Some(x) = num("minimum") {
            lo = lo.max(x);
        }
        if let Some(x) = num("exclusiveMinimum") {
            lo = lo.max(x.next_up());
        }
        if let Some(x) = num("maximum") {
            hi = hi.min(x);
        }
        if let Some(x) = num("exclusiveMaximum") {
            hi = hi.min(x.next_down());
        }
        if lo > hi {
            return Err(Unsupported::new(pointer, "number bounds that no value meets"));
        }
        // Sample within a range whose width is finite.
        const WIDE: f64 = 1e12;
        let (slo, shi) = match (lo > -cap, hi < cap) {
            (true, true) => (lo, hi),
            (true, false) => (lo, lo + WIDE.min(f64::MAX - lo.max(0.0))),
            (false, true) => (hi - WIDE.min(f64::MAX + hi.min(0.0)), hi),
            (false, false) => (-WIDE, WIDE),
        };
        let (slo, shi) = (slo.max(-f64::MAX / 4.0).min(hi), shi.min(f64::MAX / 4.0).max(lo));
        if let Some(step) = num("multipleOf") {
            if step <= 0.0 {
                return Err(Unsupported::new(pointer, "a `multipleOf` that is not positive"));
            }
            let (mut klo, mut khi) = ((slo / step).ceil(), (shi / step).floor());
            // A few million multiples are plenty: around zero when the range holds it.
            const SPAN: f64 = 1e6;
            if khi - klo > 2.0 * SPAN {
                if klo < -SPAN && khi > SPAN {
                    (klo, khi) = (-SPAN, SPAN);
                } else if klo >= -SPAN {
                    khi = klo + 2.0 * SPAN;
                } else {
                    klo = khi - 2.0 * SPAN;
                }
            }
            if klo.is_nan() || khi.is_nan() || klo > khi || klo.abs() > 1e15 || khi.abs() > 1e15 {
                return Err(Unsupported::new(pointer, "multiples of `multipleOf` within the bounds"));
            }
            let check = self.compile(
                &Value::Object(keep(m, &["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"])),
                pointer,
            )?;
            return Ok(spread_i128(klo as i128, khi as i128)
                .prop_filter_map("a multiple of `multipleOf`", move |k| {
                    let v = float_value(k as f64 * step)?;
                    check.is_valid(&v).then_some(v)
                })
                .boxed());
        }
        let mut edges: Vec<f64> = vec![lo, hi, 0.0, 1.0, -1.0, 0.5, -2.5]
            .into_iter()
            .filter(|v| (lo..=hi).contains(v) && v.abs() < cap)
            .collect();
        if edges.is_empty() {
            edges.push(slo);
        }
        let integral = if slo.ceil() <= shi.floor() && shi.floor() - slo.ceil() < 1e15 {
            spread_i128(slo.ceil() as i128, shi.floor() as i128).prop_map(int_value).boxed()
        } else {
            Just(float_value(slo).unwrap_or(Value::Null)).boxed()
        };
        Ok(prop_oneof![
            2 => proptest::sample::select(edges).prop_filter_map("a finite number", float_value),
            3 => integral,
            4 => (slo..=shi).prop_filter_map("a finite number", float_value),
        ]
        .boxed())
    }

    fn string(&self, m: &Map<String, Value>, pointer: &str) -> R<S> {
        let min = m.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
        if min > MAX_LENGTH {
            return Err(Unsupported::new(pointer, format!("a `minLength` above {MAX_LENGTH}")));
        }
        let max = m.get("maxLength").and_then(Value::as_u64).map(|n| n as usize);
        if max.is_some_and(|max| max < min) {
            return Err(Unsupported::new(pointer, "string lengths that no value meets"));
        }
        let format = m.get("format").and_then(Value::as_str).filter(|f| FORMATS.contains(f));
        let pattern = match m.get("pattern") {
            None => None,
            Some(Value::String(p)) => Some(p.as_str()),
            Some(_) => return Err(Unsupported::new(pointer, "a `pattern` that is not a string")),
        };
        let needs_check = (pattern.is_some() && self.mode == Mode::Exact)
            || (format.is_some() && (m.contains_key("minLength") || max.is_some()));
        let base: BoxedStrategy<String> = match (pattern, self.mode) {
            (Some(p), Mode::Exact) => match proptest::string::string_regex(&pattern_to_rust(p)) {
                Ok(s) => s.boxed(),
                Err(e) => {
                    return Err(Unsupported::new(pointer, format!("the pattern {p:?} cannot be generated ({e})"))
                        .with_kind(Kind::Pattern));
                }
            },
            _ => match format {
                Some(f) => format_strategy(f),
                None => {
                    let hi = max.unwrap_or(min + 16).min(min + 24);
                    string_of(min, hi)
                }
            },
        };
        let strategy = base.prop_map(Value::String);
        if !needs_check {
            return Ok(strategy.boxed());
        }
        let mut local = keep(m, &["minLength", "maxLength", "format"]);
        if self.mode == Mode::Exact
            && let Some(p) = pattern
        {
            local.insert("pattern".to_owned(), Value::String(p.to_owned()));
        }
        let check = self.compile(&Value::Object(local), pointer)?;
        Ok(strategy.prop_filter("a string the pattern, format and lengths accept", move |v| check.is_valid(v)).boxed())
    }

    fn array(&self, m: &'a Map<String, Value>, pointer: &str, at: At) -> R<S> {
        let min = m.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize;
        if min > MAX_ITEMS {
            return Err(Unsupported::new(pointer, format!("a `minItems` above {MAX_ITEMS}")));
        }
        let max = m.get("maxItems").and_then(Value::as_u64).map(|n| n as usize);
        if max.is_some_and(|max| max < min) {
            return Err(Unsupported::new(pointer, "array lengths that no value meets"));
        }
        let prefix: &[Value] = match m.get("prefixItems") {
            None => &[],
            Some(Value::Array(p)) => p,
            Some(_) => return Err(Unsupported::new(pointer, "`prefixItems` that is not a list")),
        };
        let items = m.get("items");
        let closed = items == Some(&Value::Bool(false));
        // How many prefix items, and how many after them.
        let used = prefix.len().min(max.unwrap_or(usize::MAX));
        let mut fixed = Vec::with_capacity(used);
        for (i, p) in prefix.iter().take(used).enumerate() {
            fixed.push(self.valid(p, &format!("{pointer}/prefixItems/{i}"), at.child())?);
        }
        let rest_min = min.saturating_sub(used);
        let rest_max = if closed {
            0
        } else if at.soft() {
            rest_min
        } else {
            max.map_or(rest_min + 4, |max| max.saturating_sub(used)).min(rest_min + 5)
        };
        if closed && rest_min > 0 {
            return Err(Unsupported::new(pointer, "`minItems` beyond the closed tuple"));
        }
        let rest: BoxedStrategy<Vec<Value>> = if rest_max == 0 {
            Just(Vec::new()).boxed()
        } else {
            let item = match items {
                None => any_value(at.child()),
                Some(schema) => self.valid(schema, &format!("{pointer}/items"), at.child())?,
            };
            proptest::collection::vec(item, rest_min..=rest_max).boxed()
        };
        let unique = m.get("uniqueItems") == Some(&Value::Bool(true));
        let strategy = (fixed, rest).prop_map(|(mut a, b)| {
            a.extend(b);
            a
        });
        if unique {
            Ok(strategy
                .prop_filter("unique items", |a| {
                    a.iter().enumerate().all(|(i, x)| a[..i].iter().all(|y| !vocabulary::json_equal(x, y)))
                })
                .prop_map(Value::Array)
                .boxed())
        } else {
            Ok(strategy.prop_map(Value::Array).boxed())
        }
    }

    fn object_spec(&self, m: &'a Map<String, Value>, pointer: &str) -> R<ObjectSpec<'a>> {
        let mut spec = ObjectSpec::default();
        match m.get("properties") {
            None => {}
            Some(Value::Object(props)) => {
                for (name, schema) in props {
                    spec.properties.push((name.clone(), schema, join(&format!("{pointer}/properties"), name)));
                }
            }
            Some(_) => return Err(Unsupported::new(pointer, "`properties` that is not an object")),
        }
        for r in m.get("required").and_then(Value::as_array).into_iter().flatten() {
            let r = r.as_str().ok_or_else(|| Unsupported::new(pointer, "a `required` name that is not a string"))?;
            if !spec.required.iter().any(|x| x == r) {
                spec.required.push(r.to_owned());
            }
        }
        spec.additional = match m.get("additionalProperties") {
            None | Some(Value::Bool(true)) => {
                if m.get("unevaluatedProperties") == Some(&Value::Bool(false)) {
                    Additional::Closed
                } else {
                    Additional::Open
                }
            }
            Some(Value::Bool(false)) => Additional::Closed,
            Some(schema) => Additional::Map(schema, format!("{pointer}/additionalProperties")),
        };
        spec.names = m.get("propertyNames").map(|n| (n, format!("{pointer}/propertyNames")));
        spec.min = m.get("minProperties").and_then(Value::as_u64).map(|n| n as usize);
        if spec.min.is_some_and(|n| n > MAX_ITEMS) {
            return Err(Unsupported::new(pointer, format!("a `minProperties` above {MAX_ITEMS}")));
        }
        spec.max = m.get("maxProperties").and_then(Value::as_u64).map(|n| n as usize);
        Ok(spec)
    }

    fn object(&self, spec: &ObjectSpec<'a>, pointer: &str, at: At) -> R<S> {
        let mut fields: Vec<BoxedStrategy<Option<(String, Value)>>> = Vec::new();
        for (name, schema, p) in &spec.properties {
            let required = spec.required.contains(name);
            if !required && (at.soft() || **schema == Value::Bool(false)) {
                continue;
            }
            let value = match self.valid(schema, p, at.child()) {
                Ok(v) => v,
                // An optional property is left out: the object is valid without it.
                Err(e) if !required => {
                    self.leave_out(format!("the optional property `{p}`"), &e);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let name = name.clone();
            let field = value.prop_map(move |v| (name.clone(), v));
            fields.push(if required { field.prop_map(Some).boxed() } else { proptest::option::of(field).boxed() });
        }
        for name in &spec.required {
            if spec.properties.iter().any(|(n, _, _)| n == name) {
                continue;
            }
            let value = match &spec.additional {
                Additional::Open => any_value(at.child()),
                Additional::Map(schema, p) => self.valid(schema, p, at.child())?,
                Additional::Closed => {
                    return Err(Unsupported::new(pointer, format!("`{name}` is required but not allowed")));
                }
            };
            let name = name.clone();
            fields.push(value.prop_map(move |v| Some((name.clone(), v))).boxed());
        }
        let declared: Vec<String> = spec.properties.iter().map(|(n, _, _)| n.clone()).collect();
        let extra: BoxedStrategy<Vec<(String, Value)>> = match &spec.additional {
            Additional::Map(schema, p) => {
                let lo = spec.min.unwrap_or(0).saturating_sub(spec.required.len());
                let hi = if at.soft() {
                    lo
                } else {
                    (lo + 3).min(spec.max.unwrap_or(usize::MAX).saturating_sub(spec.required.len()).max(lo))
                };
                if hi == 0 {
                    Just(Vec::new()).boxed()
                } else {
                    let key = match &spec.names {
                        Some((names, np)) => self
                            .valid(names, np, at.child())?
                            .prop_filter_map("a string property name", |k| k.as_str().map(str::to_owned))
                            .boxed(),
                        None => lower(1, 8),
                    };
                    let value = self.valid(schema, p, at.child())?;
                    proptest::collection::vec((key, value), lo..=hi).boxed()
                }
            }
            _ => Just(Vec::new()).boxed(),
        };
        let (min, max) = (spec.min, spec.max);
        let strategy = (fields, extra).prop_map(move |(fields, extra)| {
            let mut out = Map::new();
            for (k, v) in fields.into_iter().flatten() {
                out.insert(k, v);
            }
            for (k, v) in extra {
                if !declared.contains(&k) && !out.contains_key(&k) {
                    out.insert(k, v);
                }
            }
            Value::Object(out)
        });
        if min.is_some() || max.is_some() {
            Ok(strategy
                .prop_filter("the number of properties within minProperties and maxProperties", move |v| {
                    let n = v.as_object().map_or(0, Map::len);
                    min.is_none_or(|min| n >= min) && max.is_none_or(|max| n <= max)
                })
                .boxed())
        } else {
            Ok(strategy.boxed())
        }
    }

    // -------------------------------------------------------------------------------------------------------------
    // Invalid values
    // -------------------------------------------------------------------------------------------------------------

    /// Values `schema` refuses, each with what is broken; `instance` is where the value sits in the arguments.
    /// `default` is the `default` of the property the value fills, which the executor would read as absent.
    fn invalid(
        &self,
        schema: &'a Value,
        pointer: &str,
        instance: &str,
        at: At,
        default: Option<&Value>,
    ) -> R<Vec<Broken>> {
        self.tick(pointer)?;
        let Value::Object(m) = schema else { return Ok(Vec::new()) };
        if at.soft() {
            return Ok(Vec::new());
        }
        if let Some(reference) = m.get("$ref")
            && !asserts_beside(m, &["$ref"])
        {
            let (target, p) = self.resolve(reference, pointer)?;
            let default = default.or_else(|| m.get("default"));
            return self.invalid(target, &p, instance, at.through_ref(), default);
        }
        let default = default.or_else(|| m.get("default")).cloned();
        let mut out: Vec<Broken> = Vec::new();
        // Values broken at this node itself.
        let mut own: Vec<(Value, String)> = Vec::new();
        let mut push = |value: Value, broken: String| own.push((value, broken));
        let declared = types_of(m, pointer)?;
        let union_types = self.union_types(m, pointer, 0);
        let types = declared.clone().or_else(|| union_types.clone());
        let here = show(instance);

        // A value of a type the schema does not accept.
        if let Some(types) = &types
            && let Some(wrong) = wrong_type(types)
        {
            push(wrong.clone(), format!("{here}: {} where the schema wants {}", short(&wrong), types.join(" or ")));
        }
        // A value outside `enum` / `const` (of an accepted type where possible).
        let values: Option<Vec<Value>> = match (m.get("enum"), m.get("const")) {
            (Some(Value::Array(e)), _) => Some(e.clone()),
            (_, Some(c)) => Some(vec![c.clone()]),
            _ => self.union_consts(m, pointer),
        };
        if let Some(values) = &values
            && let Some(outside) = outside_of(values)
        {
            push(outside.clone(), format!("{here}: {} is not one of the allowed values", short(&outside)));
        }
        let allows =
            |t: &str| types.as_ref().is_none_or(|ts| ts.iter().any(|x| x == t || (t == "integer" && x == "number")));
        // Strings.
        if allows("string") {
            if let Some(n) = m.get("minLength").and_then(Value::as_u64).filter(|n| *n > 0 && *n <= 10_000) {
                push(Value::String("a".repeat(n as usize - 1)), format!("{here}: a string shorter than minLength {n}"));
            }
            if let Some(n) = m.get("maxLength").and_then(Value::as_u64).filter(|n| *n < 10_000) {
                push(Value::String("a".repeat(n as usize + 1)), format!("{here}: a string longer than maxLength {n}"));
            }
        }
        // Numbers.
        if allows("integer") || allows("number") {
            let integer = types.as_ref().is_some_and(|ts| ts.iter().all(|t| t != "number")) && allows("integer");
            for (value, broken) in numeric_breaks(m, integer) {
                push(value, format!("{here}: {broken}"));
            }
        }
        out.extend(
            own.into_iter()
                .filter(|(v, _)| default.as_ref().is_none_or(|d| !vocabulary::json_equal(d, v)))
                .map(|case| Just(case).boxed()),
        );
        // Arrays.
        let is = |t: &str| {
            types.as_ref().is_some_and(|ts| ts.iter().any(|x| x == t))
                || (types.is_none() && inferred_types(m).iter().any(|x| x == t))
        };
        if is("array") {
            out.extend(self.array_breaks(m, pointer, instance, at)?);
        }
        // Objects.
        if is("object") {
            out.extend(self.object_breaks(m, schema, pointer, instance, at)?);
        }
        // Every `allOf` part applies.
        if let Some(Value::Array(parts)) = m.get("allOf") {
            for (i, part) in parts.iter().enumerate() {
                out.extend(self.invalid(part, &format!("{pointer}/allOf/{i}"), instance, at.child(), None)?);
            }
        }
        Ok(out)
    }

    /// The types every branch of an `anyOf`/`oneOf` node accepts, when each says.
    fn union_types(&self, m: &'a Map<String, Value>, pointer: &str, depth: usize) -> Option<Vec<String>> {
        if depth > 16 || asserts_beside(m, &["anyOf", "oneOf"]) {
            return None;
        }
        let branches = m.get("anyOf").or_else(|| m.get("oneOf"))?.as_array()?;
        let mut out: Vec<String> = Vec::new();
        for (i, b) in branches.iter().enumerate() {
            let (b, p) = self.resolve_chain(b, format!("{pointer}/{i}")).ok()?;
            let b = b.as_object()?;
            let types = if let Some(t) = types_of(b, &p).ok()? {
                t
            } else if let Some(Value::Array(e)) = b.get("enum") {
                e.iter().map(|v| vocabulary::instance_type(v).to_owned()).collect()
            } else if let Some(c) = b.get("const") {
                vec![vocabulary::instance_type(c).to_owned()]
            } else {
                self.union_types(b, &p, depth + 1)?
            };
            for t in types {
                if !out.contains(&t) {
                    out.push(t);
                }
            }
        }
        Some(out)
    }

    /// The values of an `anyOf`/`oneOf` whose every branch is a `const` or an `enum` (a documented enum).
    fn union_consts(&self, m: &'a Map<String, Value>, pointer: &str) -> Option<Vec<Value>> {
        if asserts_beside(m, &["anyOf", "oneOf"]) {
            return None;
        }
        let branches = m.get("anyOf").or_else(|| m.get("oneOf"))?.as_array()?;
        let mut out = Vec::new();
        for (i, b) in branches.iter().enumerate() {
            let (b, _) = self.resolve_chain(b, format!("{pointer}/{i}")).ok()?;
            let b = b.as_object()?;
            match (b.get("enum"), b.get("const")) {
                (Some(Value::Array(e)), _) => out.extend(e.iter().cloned()),
                (_, Some(c)) => out.push(c.clone()),
                _ => return None,
            }
        }
        Some(out)
    }

    fn array_breaks(&self, m: &'a Map<String, Value>, pointer: &str, instance: &str, at: At) -> R<Vec<Broken>> {
        let mut out = Vec::new();
        let here = show(instance);
        let item_schema = m.get("items").filter(|i| i.is_object() || **i == Value::Bool(true));
        let prefix: &[Value] = m.get("prefixItems").and_then(Value::as_array).map_or(&[], Vec::as_slice);
        let item = |i: usize| -> R<S> {
            match prefix.get(i) {
                Some(p) => self.valid(p, &format!("{pointer}/prefixItems/{i}"), at.child()),
                None => match item_schema {
                    Some(s) => self.valid(s, &format!("{pointer}/items"), at.child()),
                    None => Ok(Just(json!("x")).boxed()),
                },
            }
        };
        let items = |n: usize| -> R<BoxedStrategy<Vec<Value>>> { Ok((0..n).map(item).collect::<R<Vec<_>>>()?.boxed()) };
        let min = m.get("minItems").and_then(Value::as_u64);
        let max = m.get("maxItems").and_then(Value::as_u64);
        if let Some(n) = min.filter(|n| (1..=64).contains(n)) {
            let broken = format!("{here}: {} items where minItems is {n}", n - 1);
            out.push(items(n as usize - 1)?.prop_map(move |a| (Value::Array(a), broken.clone())).boxed());
        }
        if let Some(n) = max.filter(|n| *n < 64) {
            let broken = format!("{here}: {} items where maxItems is {n}", n + 1);
            out.push(items(n as usize + 1)?.prop_map(move |a| (Value::Array(a), broken.clone())).boxed());
        } else if m.get("items") == Some(&Value::Bool(false)) && !prefix.is_empty() && prefix.len() < 64 {
            let n = prefix.len();
            let broken = format!("{here}: an item after the {n} the tuple holds");
            out.push(
                items(n)?
                    .prop_map(move |mut a| {
                        a.push(json!("x"));
                        (Value::Array(a), broken.clone())
                    })
                    .boxed(),
            );
        }
        if m.get("uniqueItems") == Some(&Value::Bool(true)) && max.is_none_or(|n| n >= 2) && prefix.is_empty() {
            let lo = min.unwrap_or(0).max(2) as usize;
            let broken = format!("{here}: the same item twice where items must be unique");
            out.push(
                items(lo - 1)?
                    .prop_filter("at least one item", |a| !a.is_empty())
                    .prop_map(move |mut a| {
                        a.push(a[0].clone());
                        (Value::Array(a), broken.clone())
                    })
                    .boxed(),
            );
        }
        // One item broken, the others valid, within the length bounds.
        let count = (min.unwrap_or(0) as usize).max(1);
        if count <= 64 && max.is_none_or(|n| n as usize >= count) {
            for i in 0..count.min(prefix.len().max(1)) {
                let schema = match prefix.get(i) {
                    Some(p) => p,
                    None => match m.get("items") {
                        Some(s) if s.is_object() => s,
                        _ => continue,
                    },
                };
                let sub =
                    if i < prefix.len() { format!("{pointer}/prefixItems/{i}") } else { format!("{pointer}/items") };
                for broken_item in self.invalid(schema, &sub, &format!("{instance}/{i}"), at.child(), None)? {
                    let others = items(count)?;
                    out.push(
                        (others, broken_item)
                            .prop_map(move |(mut a, (v, broken))| {
                                a[i] = v;
                                (Value::Array(a), broken)
                            })
                            .boxed(),
                    );
                }
            }
        }
        Ok(out)
    }

    fn object_breaks(
        &self,
        m: &'a Map<String, Value>,
        schema: &'a Value,
        pointer: &str,
        instance: &str,
        at: At,
    ) -> R<Vec<Broken>> {
        let mut out = Vec::new();
        let here = show(instance);
        // A valid object to break; lenient, since the broken value is refused anyway.
        let base = match self.valid(schema, pointer, at) {
            Ok(base) => base,
            Err(_) => return Ok(out),
        };
        let properties = m.get("properties").and_then(Value::as_object);
        for r in m.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            let name = r.to_owned();
            let broken = format!("{here}: the required property `{r}` is missing");
            out.push(
                base.clone()
                    .prop_map(move |mut v| {
                        if let Value::Object(o) = &mut v {
                            o.shift_remove(&name);
                        }
                        (v, broken.clone())
                    })
                    .boxed(),
            );
        }
        let closed = match m.get("additionalProperties") {
            Some(Value::Bool(false)) => true,
            None => {
                m.get("unevaluatedProperties") == Some(&Value::Bool(false)) && self.nothing_else_evaluates(m, pointer)
            }
            _ => false,
        };
        let declares_unknown = |m: &Map<String, Value>| {
            m.get("properties").and_then(Value::as_object).is_some_and(|p| p.contains_key(UNKNOWN))
        };
        if closed && !declares_unknown(m) && !m.contains_key("patternProperties") {
            let broken = format!("{here}: the unknown property `{UNKNOWN}` where the object is closed");
            out.push(
                base.clone()
                    .prop_map(move |mut v| {
                        if let Value::Object(o) = &mut v {
                            o.insert(UNKNOWN.to_owned(), json!(1));
                        }
                        (v, broken.clone())
                    })
                    .boxed(),
            );
        }
        for (name, sub) in properties.into_iter().flatten() {
            let p = join(&format!("{pointer}/properties"), name);
            let default = sub.get("default");
            for broken_value in self.invalid(sub, &p, &join(instance, name), at.child(), default)? {
                let name = name.clone();
                out.push(
                    (base.clone(), broken_value)
                        .prop_map(move |(mut v, (x, broken))| {
                            if let Value::Object(o) = &mut v {
                                o.insert(name.clone(), x);
                            }
                            (v, broken)
                        })
                        .boxed(),
                );
            }
        }
        if let Some(map) = m.get("additionalProperties").filter(|a| a.is_object())
            && !m.contains_key("propertyNames")
            && !m.contains_key("patternProperties")
            && properties.is_none_or(|p| !p.contains_key("testkit_key"))
        {
            let p = format!("{pointer}/additionalProperties");
            for broken_value in self.invalid(map, &p, &join(instance, "testkit_key"), at.child(), None)? {
                out.push(
                    (base.clone(), broken_value)
                        .prop_map(|(mut v, (x, broken))| {
                            if let Value::Object(o) = &mut v {
                                o.insert("testkit_key".to_owned(), x);
                            }
                            (v, broken)
                        })
                        .boxed(),
                );
            }
        }
        Ok(out)
    }

    /// Whether no subschema applied in place (through `$ref`, `allOf`, `anyOf`, `oneOf`) may evaluate a property
    /// it does not name, nor names the probe: then `unevaluatedProperties: false` refuses the probe.
    fn nothing_else_evaluates(&self, m: &'a Map<String, Value>, pointer: &str) -> bool {
        fn walk<'a>(g: &Gen<'a>, m: &'a Map<String, Value>, pointer: &str, depth: usize, top: bool) -> bool {
            if depth > 16 {
                return false;
            }
            if !top
                && (m.get("additionalProperties").is_some_and(|a| a != &Value::Bool(false))
                    || m.contains_key("patternProperties")
                    || m.get("unevaluatedProperties").is_some_and(|a| a != &Value::Bool(false))
                    || m.get("properties").and_then(Value::as_object).is_some_and(|p| p.contains_key(UNKNOWN)))
            {
                return false;
            }
            if let Some(r) = m.get("$ref") {
                let Ok((t, p)) = g.resolve(r, pointer) else { return false };
                match t {
                    Value::Object(t) => {
                        if !walk(g, t, &p, depth + 1, false) {
                            return false;
                        }
                    }
                    Value::Bool(false) => {}
                    _ => return false,
                }
            }
            for k in ["allOf", "anyOf", "oneOf"] {
                for b in m.get(k).and_then(Value::as_array).into_iter().flatten() {
                    match b {
                        Value::Object(b) => {
                            if !walk(g, b, pointer, depth + 1, false) {
                                return false;
                            }
                        }
                        Value::Bool(false) => {}
                        _ => return false,
                    }
                }
            }
            true
        }
        walk(self, m, pointer, 0, true)
    }
}

#[derive(Default)]
struct ObjectSpec<'a> {
    /// Name, schema, schema pointer; in declaration order.
    properties: Vec<(String, &'a Value, String)>,
    required: Vec<String>,
    additional: Additional<'a>,
    names: Option<(&'a Value, String)>,
    min: Option<usize>,
    max: Option<usize>,
}

#[derive(Default)]
enum Additional<'a> {
    /// Other properties are allowed; none is generated.
    #[default]
    Open,
    /// Only the declared properties.
    Closed,
    /// A map: other properties with values of this schema.
    Map(&'a Value, String),
}

fn keep(m: &Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    m.iter().filter(|(k, _)| keys.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn div_ceil(a: i128, b: i128) -> i128 {
    let q = a.div_euclid(b);
    if a.rem_euclid(b) == 0 { q } else { q + 1 }
}

/// A small JSON value of any type (for `true` schemas and untyped items).
fn any_value(at: At) -> S {
    let scalar = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-1000i64..=1000).prop_map(Value::from),
        string_of(0, 8).prop_map(Value::String),
    ];
    if at.soft() {
        return scalar.boxed();
    }
    prop_oneof![
        4 => scalar.clone(),
        1 => proptest::collection::vec(scalar.clone(), 0..=3).prop_map(Value::Array),
        1 => proptest::collection::vec((lower(1, 6), scalar), 0..=3).prop_map(|kv| Value::Object(kv.into_iter().collect())),
    ]
    .boxed()
}

/// A value of none of `types`, never `null` (which the executor reads as "absent" for an optional property).
fn wrong_type(types: &[String]) -> Option<Value> {
    let candidates = [json!("not-a-valid-value"), json!(7), json!(0.5), json!(true), json!({}), json!([])];
    candidates.into_iter().find(|v| !type_fits(types, v))
}

/// A value equal to none of `values`, of the same kind as the first where possible, never `null`.
fn outside_of(values: &[Value]) -> Option<Value> {
    let fresh = |v: &Value| !values.iter().any(|x| vocabulary::json_equal(x, v));
    let mut candidates = Vec::new();
    match values.first() {
        Some(Value::String(s)) => {
            candidates.push(Value::String(format!("{s}-not-one-of")));
            candidates.push(Value::String("testkit-not-one-of".to_owned()));
        }
        Some(Value::Number(_)) => {
            let max = values.iter().filter_map(Value::as_f64).fold(f64::MIN, f64::max);
            if max < 1e15 {
                candidates.push(json!(max.floor() as i64 + 1));
            }
        }
        Some(Value::Bool(b)) => candidates.push(Value::Bool(!b)),
        _ => {}
    }
    candidates.extend([
        json!("testkit-not-one-of"),
        json!(987_654_321),
        json!(false),
        json!(true),
        json!([]),
        json!({}),
    ]);
    candidates.into_iter().find(|v| fresh(v))
}

/// Numbers outside the bounds of `m`: for an integer-only schema, integers.
fn numeric_breaks(m: &Map<String, Value>, integer: bool) -> Vec<(Value, String)> {
    let mut out = Vec::new();
    let n = |k: &str| m.get(k).and_then(Value::as_number).cloned();
    let below = |x: &Number| -> Option<Value> {
        match as_i128(x) {
            Some(i) if i > i128::from(i64::MIN) => Some(int_value(i - 1)),
            Some(_) => float_value(-1e19),
            None => {
                let f = x.as_f64()?;
                if integer { Some(int_value((f.ceil() as i128).saturating_sub(1))) } else { float_value(f - 1.0) }
            }
        }
    };
    let above = |x: &Number| -> Option<Value> {
        match as_i128(x) {
            Some(i) if i < i128::from(u64::MAX) => Some(int_value(i + 1)),
            Some(_) => float_value(4e19),
            None => {
                let f = x.as_f64()?;
                if integer { Some(int_value((f.floor() as i128).saturating_add(1))) } else { float_value(f + 1.0) }
            }
        }
    };
    let mut push = |v: Option<Value>, why: String| {
        if let Some(v) = v {
            let text = format!("{} {why}", short(&v));
            out.push((v, text));
        }
    };
    let format = m.get("format").and_then(Value::as_str).and_then(vocabulary::integer_format_range);
    match (n("minimum"), format) {
        (Some(min), _) => push(below(&min), format!("is below minimum {min}")),
        (None, Some((lo, _))) => {
            let v = if lo == i128::from(i64::MIN) { float_value(-1e19) } else { Some(int_value(lo - 1)) };
            push(v, format!("is below the range of its format (from {lo})"));
        }
        _ => {}
    }
    match (n("maximum"), format) {
        (Some(max), _) => push(above(&max), format!("is above maximum {max}")),
        (None, Some((_, hi))) => {
            let v = if hi == i128::from(u64::MAX) { float_value(4e19) } else { Some(int_value(hi + 1)) };
            push(v, format!("is above the range of its format (up to {hi})"));
        }
        _ => {}
    }
    if let Some(x) = n("exclusiveMinimum") {
        push(Some(Value::Number(x.clone())), format!("is not above exclusiveMinimum {x}"));
    }
    if let Some(x) = n("exclusiveMaximum") {
        push(Some(Value::Number(x.clone())), format!("is not below exclusiveMaximum {x}"));
    }
    if let Some(step) = n("multipleOf") {
        match as_i128(&step) {
            Some(s) if s >= 2 => push(Some(int_value(s + 1)), format!("is not a multiple of {s}")),
            Some(_) if !integer => push(float_value(0.5), format!("is not a multiple of {step}")),
            Some(_) => {}
            None => push(step.as_f64().and_then(|f| float_value(f * 1.5)), format!("is not a multiple of {step}")),
        }
    }
    out
}

fn short(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 40 { format!("{}…", text.chars().take(40).collect::<String>()) } else { text }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_keyword_understood_is_an_assertion_of_the_vocabulary() {
        for k in UNDERSTOOD {
            assert!(is_assertion(k), "{k}");
        }
        for k in ["not", "if", "patternProperties", "contains", "dependentRequired", "$dynamicRef"] {
            assert!(is_assertion(k) && !UNDERSTOOD.contains(&k), "{k}");
        }
        for k in ["description", "default", "$defs", "contentMediaType", "x-keel-content", "nullable"] {
            assert!(!is_assertion(k), "{k}");
        }
    }
}
