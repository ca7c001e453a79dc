//! Test fixtures: real Rust types whose schemars schemas the renderer tests run on, and helpers to walk results.

#![allow(dead_code)]

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::tool_definition::ToolDefinition;
use keel_tools_schema::vocabulary;

/// Where someone lives.
#[derive(JsonSchema, Deserialize)]
pub(crate) struct Address {
    /// Street and number.
    pub(crate) street: String,
    pub(crate) zip: Option<String>,
}

/// How urgent an incident is.
#[derive(JsonSchema, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Severity {
    /// Nobody is paged.
    Low,
    /// Everyone is paged.
    High,
}

#[derive(JsonSchema, Deserialize)]
pub(crate) enum Color {
    Red,
    Green,
}

#[derive(JsonSchema, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(crate) enum Shape {
    /// A circle.
    Circle { radius: f64 },
    /// A square.
    Square { side: u32 },
}

#[derive(JsonSchema, Deserialize)]
#[serde(untagged)]
pub(crate) enum Id {
    Number(i64),
    Text(String),
}

/// A tree.
#[derive(JsonSchema, Deserialize)]
pub(crate) struct Node {
    pub(crate) name: String,
    pub(crate) children: Vec<Node>,
}

fn default_limit() -> u32 {
    10
}

/// Search arguments exercising most of what schemars emits.
#[derive(JsonSchema, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Everything {
    /// Where they live.
    pub(crate) home_address: Address,
    pub(crate) work: Option<Address>,
    pub(crate) previous: Vec<Address>,
    /// At most this many.
    pub(crate) max_count: Option<u32>,
    /// How bad it is.
    pub(crate) severity: Severity,
    pub(crate) secondary: Option<Severity>,
    pub(crate) color: Color,
    pub(crate) shape: Shape,
    pub(crate) id: Id,
    /// The ticket id.
    #[schemars(regex(pattern = r"^INC-[0-9]+$"))]
    pub(crate) ticket: String,
    #[schemars(extend("format" = "date-time"))]
    pub(crate) since: String,
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 100))]
    pub(crate) limit: u32,
    pub(crate) small: u8,
    pub(crate) big: i64,
    #[schemars(length(min = 1, max = 80))]
    pub(crate) title: String,
    pub(crate) labels: HashMap<String, String>,
    pub(crate) pair: (String, i32),
    pub(crate) tree: Node,
    #[serde(default)]
    pub(crate) verbose: bool,
}

/// Like [`Everything`] without what OpenAI strict mode cannot take (maps, recursion, tuples).
#[derive(JsonSchema, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Strictable {
    /// Where they live.
    pub(crate) home_address: Address,
    pub(crate) work: Option<Address>,
    pub(crate) previous: Vec<Address>,
    /// At most this many.
    pub(crate) max_count: Option<u32>,
    /// How bad it is.
    pub(crate) severity: Severity,
    pub(crate) secondary: Option<Severity>,
    pub(crate) color: Color,
    pub(crate) shape: Shape,
    pub(crate) id: Id,
    /// The ticket id.
    #[schemars(regex(pattern = r"^INC-[0-9]+$"))]
    pub(crate) ticket: String,
    #[schemars(extend("format" = "date-time"))]
    pub(crate) since: String,
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 100))]
    pub(crate) limit: u32,
    pub(crate) small: u8,
    #[schemars(length(min = 1, max = 80))]
    pub(crate) title: String,
    #[serde(default)]
    pub(crate) verbose: bool,
}

/// A map next to a struct.
#[derive(JsonSchema, Deserialize)]
pub(crate) struct Labelled {
    pub(crate) labels: HashMap<String, String>,
    pub(crate) owner: Address,
}

/// A struct with a flattened internally tagged enum.
#[derive(JsonSchema, Deserialize)]
pub(crate) struct Flattened {
    pub(crate) top: String,
    #[serde(flatten)]
    pub(crate) shape: Shape,
}

/// Fields declared out of alphabetical order, at the top level and in a definition.
#[derive(JsonSchema, Deserialize)]
pub(crate) struct Ordered {
    pub(crate) zulu: String,
    pub(crate) alpha: Option<u32>,
    pub(crate) mike: Inner,
    pub(crate) bravo: Vec<Inner>,
}

/// Nested, also out of order.
#[derive(JsonSchema, Deserialize)]
pub(crate) struct Inner {
    pub(crate) yankee: bool,
    pub(crate) echo: String,
}

/// Valid arguments for [`Everything`].
pub(crate) fn everything_arguments() -> Value {
    json!({
        "homeAddress": {"street": "Main 1"},
        "work": null,
        "previous": [{"street": "Old 2", "zip": "1234"}],
        "maxCount": 3,
        "severity": "high",
        "color": "Red",
        "shape": {"kind": "square", "side": 2},
        "id": 7,
        "ticket": "INC-42",
        "since": "2024-01-01T00:00:00Z",
        "small": 1,
        "big": -5,
        "title": "Outage",
        "labels": {"team": "core"},
        "pair": ["a", 1],
        "tree": {"name": "root", "children": [{"name": "leaf", "children": []}]}
    })
}

/// The schemars schema of `T`, as compiled tools generate it.
pub(crate) fn schema<T: JsonSchema>() -> Value {
    crate::__private::schema_for::<T>()
}

/// A read tool named `name` with `input` as its argument schema.
pub(crate) fn definition(name: &'static str, input: Value) -> ToolDefinition {
    let built = ToolDefinition::builder(name)
        .description("Searches incidents.")
        .input_schema(input)
        .handler(|_v, _c| async { Ok(Value::Null) })
        .build();
    match built {
        Ok(d) => d,
        Err(e) => panic!("fixture definition: {e}"),
    }
}

/// Whether `key` is an object key anywhere in `v` (data and names included).
pub(crate) fn contains_key_anywhere(v: &Value, key: &str) -> bool {
    match v {
        Value::Object(map) => map.contains_key(key) || map.values().any(|c| contains_key_anywhere(c, key)),
        Value::Array(items) => items.iter().any(|c| contains_key_anywhere(c, key)),
        _ => false,
    }
}

/// Calls `f` on `schema` and every subschema under it (schema positions only: property names and `enum` values
/// are not visited as schemas).
pub(crate) fn walk_schemas(schema: &Value, f: &mut dyn FnMut(&Value)) {
    f(schema);
    vocabulary::for_each_child(schema, |_, _, child| walk_schemas(child, f));
}

/// Schemas no generator would produce, to check that nothing panics or loops.
pub(crate) fn hostile_schemas() -> Vec<Value> {
    let mut deep = json!({"type": "string"});
    for i in 0..300 {
        deep = if i % 2 == 0 {
            json!({"type": "object", "properties": {"x": deep}})
        } else {
            json!({"type": "array", "items": deep})
        };
    }
    let mut refs_deep = Map::new();
    for i in 0..300 {
        refs_deep.insert(format!("D{i}"), json!({"$ref": format!("#/$defs/D{}", i + 1)}));
    }
    refs_deep.insert("D300".to_owned(), json!({"type": "object", "properties": {"y": {"$ref": "#/$defs/D0"}}}));
    let mut wide_defs = Map::new();
    for i in 0..24 {
        wide_defs.insert(
            format!("W{i}"),
            json!({"type": "object", "properties": {
                "a": {"$ref": format!("#/$defs/W{}", i + 1)},
                "b": {"$ref": format!("#/$defs/W{}", i + 1)},
                "c": {"anyOf": [{"$ref": format!("#/$defs/W{}", i + 1)}, {"type": "null"}]}
            }}),
        );
    }
    wide_defs.insert("W24".to_owned(), json!({"type": "integer"}));
    vec![
        json!(null),
        json!(true),
        json!(false),
        json!(42),
        json!("object"),
        json!([{"type": "object"}]),
        json!({}),
        json!({"type": "object"}),
        json!({"type": 5, "properties": [], "required": "x", "enum": 3, "anyOf": {}, "items": [true, 1]}),
        json!({"type": "object", "properties": {"a": 1, "b": "x", "c": null, "d": [], "e": false}}),
        json!({"type": "object", "$ref": "#"}),
        json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"$ref": "#/$defs/A"}}}),
        json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}}),
        json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/%ZZ"}, "b": {"$ref": "#/%24defs/A"}}, "$defs": {"A": {"type": "string"}}}),
        json!({"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}}),
        json!({"type": "object", "properties": {"a": {"anyOf": []}, "b": {"oneOf": [{"type": "null"}]}, "c": {"allOf": [false, {"type": "string"}]}}}),
        json!({"type": "object", "properties": {"a": {"type": ["null"]}, "b": {"type": []}, "c": {"enum": []}, "d": {"const": null}}}),
        json!({"type": "object", "allOf": [{"properties": {"a": {"type": "string"}}}, {"properties": {"a": {"type": "integer"}}}]}),
        json!({"type": "object", "properties": {"t": {"type": "array", "items": [{"type": "string"}], "additionalItems": false}}}),
        json!({"type": "object", "properties": {"p": {"type": "object", "patternProperties": {"^x": {"type": "string"}}, "propertyNames": {"pattern": "^x"}}}}),
        json!({"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {"$ref": "#"}}}}),
        json!({"type": "object", "properties": {"s": {"type": "string", "default": {"nested": [1, 2, {"deep": "x".repeat(500)}]}}}}),
        json!({"type": "object", "properties": {"root": {"$ref": "#/$defs/D0"}}, "$defs": refs_deep}),
        json!({"type": "object", "properties": {"root": {"$ref": "#/$defs/W0"}}, "$defs": wide_defs}),
        json!({"type": "object", "properties": {"deep": deep}}),
    ]
}
