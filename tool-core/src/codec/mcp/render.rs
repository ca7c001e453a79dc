//! MCP `tools/list` entries.
//!
//! `{"name", "description", "inputSchema", "outputSchema"?, "annotations"}`:
//!
//! * `name` is the tool's own name: MCP allows dots, so `incident.search` stays as it is;
//! * `inputSchema` is the canonical input schema unchanged (JSON Schema 2020-12, the dialect MCP assumes);
//! * `outputSchema` is the result schema when there is one and it describes an object (`"type": "object"`).
//!   MCP requires an object there, because structured results travel as `structuredContent`, which is a JSON
//!   object. A tool returning a string, a number, an array or an `Option` has no `outputSchema`; its result is
//!   still returned, as content;
//! * `annotations` always carries the four hints: `readOnlyHint` (effect `read`), `destructiveHint` (effect
//!   `destructive`), `idempotentHint`, and `openWorldHint: false` (keel tools act on the systems they are written
//!   for, not an open-ended world).

use serde_json::{Map, Value, json};

use crate::effect::Effect;

/// Builds the entry from its parts.
pub(super) fn tool(
    name: &str,
    description: &str,
    input: &Value,
    output: Option<&Value>,
    effect: Effect,
    idempotent: bool,
) -> Value {
    let mut entry = Map::new();
    entry.insert("name".to_owned(), Value::String(name.to_owned()));
    entry.insert("description".to_owned(), Value::String(description.to_owned()));
    entry.insert("inputSchema".to_owned(), input.clone());
    if let Some(output) = output.and_then(object_output) {
        entry.insert("outputSchema".to_owned(), output);
    }
    entry.insert(
        "annotations".to_owned(),
        json!({
            "readOnlyHint": effect == Effect::Read,
            "destructiveHint": effect == Effect::Destructive,
            "idempotentHint": idempotent,
            "openWorldHint": false,
        }),
    );
    Value::Object(entry)
}

/// The `outputSchema` for a result schema that describes objects only: the schema itself when it says
/// `"type": "object"`; a union (`oneOf` or `anyOf`, a data enum) whose every branch is an object schema, with
/// `"type": "object"` added (MCP requires it at the root, and it changes nothing the branches accept); else none.
fn object_output(schema: &Value) -> Option<Value> {
    if is_object_schema(schema) {
        return Some(schema.clone());
    }
    let Value::Object(map) = schema else { return None };
    if map.contains_key("type") {
        return None;
    }
    let unions: Vec<&Vec<Value>> =
        ["oneOf", "anyOf"].iter().filter_map(|k| map.get(*k).and_then(Value::as_array)).collect();
    let [branches] = unions.as_slice() else { return None };
    let all_objects = !branches.is_empty()
        && branches.iter().all(|b| is_object_schema(keel_tools_schema::vocabulary::resolve(schema, b)));
    if !all_objects {
        return None;
    }
    let mut with_type = Map::with_capacity(map.len() + 1);
    for (k, v) in map {
        with_type.insert(k.clone(), v.clone());
        if k == "$schema" {
            with_type.insert("type".to_owned(), Value::String("object".to_owned()));
        }
    }
    with_type.entry("type").or_insert_with(|| Value::String("object".to_owned()));
    Some(Value::Object(with_type))
}

/// Whether the schema describes objects only: `"type": "object"` (or `["object"]`).
fn is_object_schema(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.len() == 1 && ts[0] == "object",
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::effect::Effect;
    use crate::tool_definition::ToolDefinition;
    use crate::tool_schemas::Provider;
    use crate::tool_schemas::fixtures::{self, Address, Everything};

    fn def(effect: Effect, idempotent: Option<bool>, output: Option<Value>) -> ToolDefinition {
        let mut b = ToolDefinition::builder("incident.search")
            .description("Searches incidents.")
            .effect(effect)
            .input_schema(fixtures::schema::<Everything>());
        if let Some(i) = idempotent {
            b = b.idempotent(i);
        }
        if let Some(o) = output {
            b = b.output_schema(o);
        }
        match b.handler(|_v, _c| async { Ok(Value::Null) }).build() {
            Ok(d) => d,
            Err(e) => panic!("fixture definition: {e}"),
        }
    }

    #[test]
    fn annotations_for_each_effect() {
        let cases = [
            (
                Effect::Read,
                None,
                json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}),
            ),
            (
                Effect::Write,
                None,
                json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false}),
            ),
            (
                Effect::Write,
                Some(true),
                json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}),
            ),
            (
                Effect::Destructive,
                None,
                json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": false}),
            ),
        ];
        for (effect, idempotent, expected) in cases {
            let d = def(effect, idempotent, None);
            assert_eq!(d.render(Provider::Mcp)["annotations"], expected, "{effect}");
        }
    }

    #[test]
    fn name_keeps_dots_and_input_schema_is_canonical() {
        let d = def(Effect::Read, None, None);
        let t = d.render(Provider::Mcp);
        assert_eq!(t["name"], "incident.search");
        assert_eq!(t["description"], "Searches incidents.");
        assert_eq!(&t["inputSchema"], d.input_schema());
        assert!(t["inputSchema"]["$defs"].is_object());
        assert!(t.get("outputSchema").is_none());
        assert!(t.get("title").is_none());
    }

    #[test]
    fn output_schema_only_when_it_is_an_object() {
        let d = def(Effect::Read, None, Some(fixtures::schema::<Address>()));
        assert_eq!(d.render(Provider::Mcp)["outputSchema"], fixtures::schema::<Address>());
        for not_object in
            [fixtures::schema::<String>(), fixtures::schema::<Vec<Address>>(), fixtures::schema::<Option<Address>>()]
        {
            let d = def(Effect::Read, None, Some(not_object));
            assert!(d.render(Provider::Mcp).get("outputSchema").is_none());
        }
    }

    #[test]
    fn a_union_of_objects_is_an_object_result() {
        #[allow(dead_code)]
        #[derive(schemars::JsonSchema)]
        #[serde(tag = "kind")]
        enum Outcome {
            Done { at: String },
            Queued { position: u32 },
        }
        #[allow(dead_code)]
        #[derive(schemars::JsonSchema)]
        #[serde(untagged)]
        enum Mixed {
            Text(String),
            Both { a: u8 },
        }
        let generated = fixtures::schema::<Outcome>();
        assert!(generated.get("type").is_none(), "{generated}");
        let d = def(Effect::Read, None, Some(generated.clone()));
        let output = &d.render(Provider::Mcp)["outputSchema"];
        assert_eq!(output["type"], "object");
        assert_eq!(output["oneOf"], generated["oneOf"]);
        // It accepts exactly what the generated schema accepts.
        let (with, without) =
            (jsonschema::validator_for(output).unwrap(), jsonschema::validator_for(&generated).unwrap());
        for v in [
            json!({"kind": "Done", "at": "now"}),
            json!({"kind": "Queued", "position": 2}),
            json!({"kind": "x"}),
            json!(1),
        ] {
            assert_eq!(with.is_valid(&v), without.is_valid(&v), "{v}");
        }
        // A union with a non-object branch is not.
        let d = def(Effect::Read, None, Some(fixtures::schema::<Mixed>()));
        assert!(d.render(Provider::Mcp).get("outputSchema").is_none());
    }
}
