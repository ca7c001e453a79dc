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
//!
//! The generator walks the schema once per strategy; its parts are in files named for what they hold: the keywords
//! it reads and `$ref`s (`keywords`), the dispatch by type (`types`), the compositions (`compose`), numbers
//! (`numbers`, `spread`), strings (`strings`), arrays (`arrays`), objects (`objects`) and the invalid values
//! (`invalid`).

mod arrays;
mod compose;
mod invalid;
mod keywords;
mod numbers;
mod objects;
mod spread;
mod strings;
mod types;

use std::cell::{Cell, RefCell};
use std::fmt;

use proptest::prelude::*;
use proptest::strategy::Union;
use serde_json::{Map, Value};

use crate::imports::CompiledSchema;

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

/// Valid values.
type S = BoxedStrategy<Value>;
/// Invalid values, each with what is broken.
type Broken = BoxedStrategy<(Value, String)>;
type R<T> = Result<T, Unsupported>;

/// What the generator may ignore.
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
/// The most items (or properties) a schema may require before it is not generated for.
const MAX_ITEMS: usize = 1_000;

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

/// The generator over one schema.
struct Gen<'a> {
    /// The whole schema, where `$ref`s resolve.
    root: &'a Value,
    mode: Mode,
    /// Strategies built so far, against [`BUDGET`].
    built: Cell<usize>,
    /// `$ref`s followed so far: to tell branches that recurse from those that do not.
    refs_followed: Cell<usize>,
    /// The parts left out of the values, and why.
    notes: RefCell<Vec<String>>,
}

/// `pointer` and one more token, escaped as JSON pointers escape it.
fn join(pointer: &str, token: &str) -> String {
    format!("{pointer}/{}", token.replace('~', "~0").replace('/', "~1"))
}

/// `` `/a/b` `` or `the arguments` for the root.
fn show(instance: &str) -> String {
    if instance.is_empty() { "the arguments".to_owned() } else { format!("`{instance}`") }
}

/// The entries of `m` named in `keys`.
fn keep(m: &Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    m.iter().filter(|(k, _)| keys.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect()
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

    /// Counts one strategy against the [`BUDGET`].
    fn tick(&self, pointer: &str) -> R<()> {
        self.built.set(self.built.get() + 1);
        if self.built.get() > BUDGET {
            return Err(Unsupported::new(pointer, "the schema is too large to generate values for"));
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

    /// The validator of a part of the schema, to keep the generated values it accepts.
    fn compile(&self, schema: &Value, pointer: &str) -> R<CompiledSchema> {
        CompiledSchema::compile(&self.with_definitions(schema))
            .map_err(|e| Unsupported::new(pointer, format!("the schema does not compile: {e}")))
    }
}
