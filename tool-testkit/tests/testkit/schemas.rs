//! The generator over the schemas schemars emits for plain Rust types, and over hand-written schemas: every
//! generated value is accepted by the executor, every broken one refused before the handler.

// The argument types are only deserialized and printed.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;

use keel_tools_core::definition::{Effect, ToolDefinition};
use keel_tools_core::schema::CompiledSchema;
use keel_tools_core::{Registry, ToolView, tool};
use keel_tools_testkit::{Outcome, ToolCheck, schema};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Color {
    Red,
    Green,
    /// Documented.
    Blue,
}

#[derive(Debug, Deserialize, JsonSchema)]
enum Shape {
    Circle { radius: f64 },
    Square(u16),
    Empty,
    Pair(i8, bool),
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Event {
    Opened { by: String },
    Closed { by: String, reason: Option<String> },
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(tag = "t", content = "c")]
enum Adjacent {
    Num(i32),
    Text(String),
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
enum Loose {
    Number(u32),
    Words(Vec<String>),
}

#[derive(Debug, Deserialize, JsonSchema)]
struct Inner {
    #[schemars(length(min = 1, max = 5))]
    code: String,
    #[schemars(range(min = -3, max = 3))]
    level: i32,
    #[serde(default)]
    tags: Vec<String>,
}

fn default_limit() -> u16 {
    10
}

/// Every shape of argument.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Everything {
    name: String,
    count: u64,
    small: i8,
    ratio: f32,
    precise: f64,
    flag: bool,
    letter: char,
    maybe: Option<u32>,
    color: Color,
    maybe_color: Option<Color>,
    shape: Shape,
    event: Event,
    adjacent: Adjacent,
    loose: Loose,
    inner: Inner,
    inners: Vec<Inner>,
    maybe_inner: Option<Inner>,
    map: HashMap<String, u8>,
    sorted: BTreeMap<String, Option<bool>>,
    pair: (String, i64),
    #[schemars(length(min = 1, max = 3))]
    few: Vec<u8>,
    #[serde(default = "default_limit")]
    limit: u16,
    #[schemars(email)]
    email: String,
    #[schemars(url)]
    link: Option<String>,
    address: Ipv4Addr,
    #[schemars(regex(pattern = r"^[A-Z]{3}-\d{2,4}$"))]
    ticket: String,
    any: Value,
}

/// Takes everything.
#[tool(effect = "read", version = "1.0")]
fn take_everything(args: Everything) -> String {
    format!("{args:?}").len().to_string()
}

/// A tree: a recursive type.
#[derive(Debug, Deserialize, JsonSchema)]
struct Tree {
    label: String,
    children: Vec<Tree>,
    next: Option<Box<Tree>>,
}

/// Counts the nodes of a tree.
#[tool(effect = "read", version = "1.0")]
fn count_nodes(tree: Tree) -> usize {
    fn count(t: &Tree) -> usize {
        1 + t.children.iter().map(count).sum::<usize>() + t.next.as_deref().map_or(0, count)
    }
    count(&tree)
}

#[derive(Debug, Deserialize, JsonSchema)]
enum Mode {
    Fast { level: u8 },
    Careful { checks: Vec<String> },
}

/// A struct with a flattened enum.
#[derive(Debug, Deserialize, JsonSchema)]
struct Flattened {
    id: String,
    #[serde(flatten)]
    mode: Mode,
}

/// Takes a flattened enum.
#[tool(effect = "write", version = "1.0")]
fn flattened_args(args: Flattened) -> String {
    format!("{args:?}")
}

/// Named arguments, one with a default.
#[tool(effect = "destructive", version = "1.0")]
fn named_args(
    #[arg(description = "Which")] which: Vec<Color>,
    #[arg(description = "How many")] many: Option<i64>,
    note: Option<String>,
) -> bool {
    which.len() as i64 >= many.unwrap_or(0) || note.is_some()
}

/// Takes nothing.
#[tool(effect = "read", version = "1.0")]
fn takes_nothing() -> String {
    "nothing".to_owned()
}

const COMPILED: &[&str] = &["count_nodes", "flattened_args", "named_args", "take_everything", "takes_nothing"];

fn compiled_view() -> ToolView {
    Registry::from_inventory().unwrap().view().names(COMPILED.iter().copied()).build().unwrap()
}

/// A tool with a hand-written argument schema, whose handler answers `null`.
fn dynamic(name: &'static str, schema: Value) -> ToolDefinition {
    ToolDefinition::builder(name)
        .description("a hand-written schema")
        .effect(Effect::Read)
        .input_schema(schema)
        .handler(|_args: Value, _ctx| async { Ok(Value::Null) })
        .build()
        .unwrap()
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

fn dynamic_tools() -> Vec<ToolDefinition> {
    vec![
        dynamic(
            "formats",
            object(
                json!({
                    "when": {"type": "string", "format": "date-time"},
                    "day": {"type": "string", "format": "date"},
                    "at": {"type": "string", "format": "time"},
                    "id": {"type": "string", "format": "uuid"},
                    "mail": {"type": "string", "format": "email"},
                    "host": {"type": "string", "format": "hostname"},
                    "v6": {"type": "string", "format": "ipv6"},
                    "site": {"type": "string", "format": "uri"},
                    "ref": {"type": "string", "format": "uri-reference"},
                    "span": {"type": "string", "format": "duration"},
                    "pointer": {"type": "string", "format": "json-pointer"},
                    "re": {"type": "string", "format": "regex"},
                    "custom": {"type": "string", "format": "my-own-format"},
                    "short_id": {"type": "string", "format": "uuid", "maxLength": 36},
                }),
                &["when", "day", "at", "id", "mail", "host", "v6", "site", "ref", "span", "pointer", "re", "custom"],
            ),
        ),
        dynamic(
            "numbers",
            object(
                json!({
                    "even": {"type": "integer", "multipleOf": 2, "minimum": -10, "maximum": 10},
                    "cents": {"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 5},
                    "open": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                    "gt": {"type": "integer", "exclusiveMinimum": 5},
                    "byte": {"type": "integer", "format": "uint8"},
                    "huge": {"type": "integer", "format": "uint64"},
                    "low": {"type": "integer", "format": "int64"},
                    "half": {"type": "number", "minimum": 0.5, "maximum": 0.75},
                }),
                &["even", "cents", "open", "gt", "byte", "huge", "low", "half"],
            ),
        ),
        dynamic(
            "unions",
            json!({
                "type": "object",
                "properties": {
                    "either": {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "integer", "minimum": 0}]},
                    "exactly": {"oneOf": [{"type": "integer", "minimum": 0}, {"type": "integer", "maximum": 5}]},
                    "nullable": {"type": ["string", "null"], "minLength": 2},
                    "constant": {"const": "fixed"},
                    "choice": {"enum": ["a", 1, true, null]},
                    "documented": {"oneOf": [
                        {"const": "x", "description": "the x"},
                        {"const": "y", "description": "the y"}
                    ]},
                    "tuple": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": false, "minItems": 2},
                    "unique": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 50}, "uniqueItems": true, "minItems": 2, "maxItems": 4},
                    "ref": {"$ref": "#/$defs/Thing"},
                    "all": {"allOf": [{"$ref": "#/$defs/Thing"}]},
                    "bounded_map": {"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 1, "maxProperties": 2},
                    "names": {"type": "object", "additionalProperties": {"type": "boolean"}, "propertyNames": {"enum": ["p", "q"]}},
                },
                "required": ["either", "exactly", "nullable", "constant", "choice", "documented", "tuple", "unique", "ref", "all", "bounded_map"],
                "additionalProperties": false,
                "$defs": {"Thing": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false}}
            }),
        ),
        dynamic("pattern_lookahead", object(json!({"p": {"type": "string", "pattern": "^(?=a)\\w+$"}}), &["p"])),
        dynamic(
            "pattern_optional",
            object(json!({"p": {"type": "string", "pattern": "\\bword\\b"}, "q": {"type": "integer"}}), &["q"]),
        ),
        dynamic("uses_not", object(json!({"p": {"not": {"type": "string"}}}), &["p"])),
        dynamic("open_object", json!({"type": "object", "properties": {"a": {"type": "string"}}})),
    ]
}

fn dynamic_view() -> ToolView {
    Registry::builder().without_inventory().tools(dynamic_tools()).build().unwrap().all().clone()
}

fn outcome<'r>(report: &'r keel_tools_testkit::Report, tool: &str) -> (&'r Outcome, &'r Outcome) {
    let t = report.tools().iter().find(|t| t.name() == tool).unwrap();
    (t.valid_arguments(), t.invalid_arguments())
}

#[test]
fn plain_rust_types_pass_both_properties() {
    let report = ToolCheck::new(&compiled_view()).cases(128).seed(1).assert();
    for tool in COMPILED {
        let (valid, invalid) = outcome(&report, tool);
        assert!(matches!(valid, Outcome::Passed(128)), "{tool}: {valid:?}\n{report}");
        assert!(matches!(invalid, Outcome::Passed(128)), "{tool}: {invalid:?}\n{report}");
    }
}

#[test]
fn plain_rust_types_pass_with_other_seeds() {
    for seed in 2..6 {
        ToolCheck::new(&compiled_view()).cases(32).seed(seed).assert();
    }
}

#[test]
fn hand_written_schemas_pass_or_are_skipped_with_a_note() {
    let report = ToolCheck::new(&dynamic_view()).cases(128).seed(3).assert();
    for tool in ["formats", "numbers", "unions", "open_object"] {
        let (valid, invalid) = outcome(&report, tool);
        assert!(matches!(valid, Outcome::Passed(_)), "{tool}: {valid:?}\n{report}");
        assert!(matches!(invalid, Outcome::Passed(_)), "{tool}: {invalid:?}\n{report}");
    }
    // A pattern the generator cannot produce: the valid property is skipped, the invalid one still runs.
    let (valid, invalid) = outcome(&report, "pattern_lookahead");
    assert!(matches!(valid, Outcome::Skipped(why) if why.contains("pattern")), "{valid:?}");
    assert!(matches!(invalid, Outcome::Passed(_)), "{invalid:?}");
    // An optional property with such a pattern is left out, with a note.
    let tool = report.tools().iter().find(|t| t.name() == "pattern_optional").unwrap();
    assert!(matches!(tool.valid_arguments(), Outcome::Passed(_)));
    assert!(tool.notes().iter().any(|n| n.contains("/properties/p")), "{:?}", tool.notes());
    // A keyword the generator does not understand: skipped, not failed.
    let (valid, _) = outcome(&report, "uses_not");
    assert!(matches!(valid, Outcome::Skipped(why) if why.contains("`not`")), "{valid:?}");
    assert!(report.notes().iter().any(|n| n.contains("uses_not")));
    assert!(report.to_string().contains("not checked:"));
}

/// Every value of the strategy is valid against the schema as the executor validates it (the integer formats'
/// ranges spelled out), and every broken one invalid.
fn sample(schema: &Value, n: usize) {
    let mut validated = schema.clone();
    keel_tools_schema::transform::bound_integers(&mut validated);
    let compiled = CompiledSchema::compile(&validated).unwrap();
    let mut runner = TestRunner::deterministic();
    let valid = schema::arguments(schema).unwrap();
    for _ in 0..n {
        let v = valid.new_tree(&mut runner).unwrap().current();
        assert!(compiled.is_valid(&v), "{v} against {schema}: {:?}", compiled.validate(&v));
    }
    let invalid = schema::invalid_arguments(schema).unwrap().unwrap();
    for _ in 0..n {
        let i = invalid.new_tree(&mut runner).unwrap().current();
        assert!(!compiled.is_valid(&i.value), "{} ({}) against {schema}", i.value, i.broken);
    }
}

#[test]
fn generated_values_follow_the_schemas() {
    for def in
        dynamic_tools().iter().filter(|d| !["pattern_lookahead", "pattern_optional", "uses_not"].contains(&d.name()))
    {
        sample(def.input_schema(), 300);
    }
    for def in compiled_view().iter() {
        sample(def.input_schema(), 300);
    }
}

#[test]
fn what_is_not_understood_says_where() {
    let e =
        schema::arguments(&json!({"type": "object", "properties": {"x": {"if": {}}}, "required": ["x"]})).unwrap_err();
    assert_eq!(e.pointer, "/properties/x");
    assert!(e.to_string().contains("`if`"), "{e}");
    let e = schema::arguments(&json!({"$ref": "https://example.com/schema"})).unwrap_err();
    assert!(e.reason.contains("not local"), "{e}");
    assert!(schema::invalid_arguments(&json!(true)).unwrap().is_none());
    // Strange schemas are errors, never panics or endless recursion.
    let looping = json!({
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "required": ["a"],
        "$defs": {"A": {"anyOf": [{"$ref": "#/$defs/A"}]}}
    });
    assert!(schema::arguments(&looping).is_err());
    let _ = schema::invalid_arguments(&looping);
    assert!(schema::arguments(&json!({"$ref": "#"})).is_err());
    assert!(schema::arguments(&json!({"type": "string", "minLength": 1_000_000_000u64})).is_err());
    assert!(schema::arguments(&json!({"type": "integer", "minimum": 5, "maximum": 4})).is_err());
    assert!(schema::arguments(&json!({"type": 5})).is_err());
    for odd in [json!({"type": "number", "minimum": 1e300}), json!({"type": "integer", "maximum": 1e300}), json!(false)]
    {
        let _ = schema::arguments(&odd);
        let _ = schema::invalid_arguments(&odd);
    }
}

#[test]
fn references_are_read_as_the_validator_reads_them() {
    let defs = json!({"a b": {"type": "integer", "minimum": 1}});
    let reason = |reference: &str| {
        schema::arguments(&json!({"$ref": reference, "$defs": defs.clone()})).map(|_| ()).unwrap_err().reason
    };
    assert!(reason("other.json#/$defs/x").contains("not local"), "{}", reason("other.json#/$defs/x"));
    assert!(reason("#anchor").contains("names an anchor"));
    // A fragment is a JSON pointer when it starts with `/` as written, before percent-decoding.
    assert!(reason("#%2F$defs%2Fa%20b").contains("names an anchor"));
    assert!(reason("#/$defs/missing").contains("leads nowhere"));
    sample(&json!({"$ref": "#/$defs/a%20b", "$defs": defs}), 20);
}

#[test]
fn annotations_are_ignored_as_the_validator_ignores_them() {
    // Draft 2020-12's content keywords annotate: the validator neither decodes nor parses the string.
    let blob = json!({"type": "string", "contentEncoding": "base64", "contentMediaType": "application/json"});
    sample(&object(json!({"blob": blob, "n": {"type": "integer", "deprecated": true, "x-unit": "s"}}), &["blob"]), 50);
}

#[test]
fn the_seed_fixes_the_values() {
    use proptest::test_runner::{Config, RngAlgorithm, TestRng};
    let schema = compiled_view().get("take_everything").unwrap().input_schema().clone();
    let strategy = schema::arguments(&schema).unwrap();
    let values = |seed: u8| {
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]);
        let mut runner = TestRunner::new_with_rng(Config::default(), rng);
        (0..5).map(|_| strategy.new_tree(&mut runner).unwrap().current()).collect::<Vec<_>>()
    };
    assert_eq!(values(1), values(1));
    assert_ne!(values(1), values(2));
}
