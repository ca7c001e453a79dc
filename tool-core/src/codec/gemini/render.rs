//! Gemini `functionDeclarations` entries: `{"name", "description", "parametersJsonSchema"}`.
//!
//! `parametersJsonSchema` (unlike the older OpenAPI-subset `parameters`) takes JSON Schema, `$defs`/`$ref`
//! included. keel still inlines references, which every Gemini model handles best, keeping `$defs` only for a
//! recursive type; `$schema` is removed. Gemini generates an object's properties in the order of their keys there,
//! which is the declaration order (its `propertyOrdering` belongs to the OpenAPI-subset `parameters`: the SDK's model
//! of `parametersJsonSchema` refuses it).
//!
//! The subset has no `const`: a documented unit enum (schemars writes a `oneOf` of `const`s, one per variant with
//! its doc comment) becomes a plain `enum`, the variants' docs folded into the description as for Ollama (`Values:
//! "low" = Nobody is paged; "high" = Everyone is paged.`), and any other `const` (the tag of a data enum's variant)
//! a one-value `enum`.
//!
//! The name is the [`ToolDefinition::wire_name`](crate::definition::ToolDefinition::wire_name).

use serde_json::{Value, json};

use keel_tools_schema::transform;
use keel_tools_schema::vocabulary::{MAX_DEPTH, for_each_child_mut};

/// `{"name", "description", "parametersJsonSchema"}`.
pub(super) fn declaration(wire_name: &str, description: &str, canonical: &Value) -> Value {
    json!({
        "name": wire_name,
        "description": description,
        "parametersJsonSchema": parameters(canonical),
    })
}

/// The canonical input schema as Gemini is sent it (see the module docs).
fn parameters(canonical: &Value) -> Value {
    fn adapt(schema: &mut Value, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        if let Value::Object(map) = schema {
            if let Some(note) = transform::collapse_documented_enum(map) {
                transform::append_notes(map, &[note]);
            }
            if let Some(c) = map.shift_remove("const") {
                match map.get_mut("enum") {
                    Some(Value::Array(values)) => values.retain(|v| *v == c),
                    _ => {
                        map.insert("enum".to_owned(), Value::Array(vec![c]));
                    }
                }
            }
        }
        for_each_child_mut(schema, |_, _, child| adapt(child, depth + 1));
    }
    let mut schema = transform::inline_for_json_schema(canonical);
    adapt(&mut schema, 0);
    schema
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::Provider;
    use crate::tool_schemas::fixtures::{self, Everything};

    #[test]
    fn wire_name_and_inlined_json_schema() {
        let def = fixtures::definition("incident.search", fixtures::schema::<Everything>());
        let d = def.render(Provider::Gemini);
        assert_eq!(d["name"], "incident-search");
        assert_eq!(d["description"], "Searches incidents.");
        let s = &d["parametersJsonSchema"];
        assert!(s.get("$schema").is_none());
        assert_eq!(s["properties"]["previous"]["items"]["properties"]["zip"]["type"], json!(["string", "null"]));
        assert!(s["$defs"].get("Address").is_none());
        assert_eq!(s["properties"]["tree"]["properties"]["children"]["items"]["$ref"], "#/$defs/Node");
        assert_eq!(s["required"], def.input_schema()["required"]);
    }

    #[test]
    fn documented_enums_are_plain_enums_with_their_docs_in_the_description() {
        let def = fixtures::definition("incident.search", fixtures::schema::<Everything>());
        let s = &def.render(Provider::Gemini)["parametersJsonSchema"];
        assert_eq!(
            s["properties"]["severity"],
            json!({
                "type": "string",
                "enum": ["low", "high"],
                "description": "How bad it is. Values: \"low\" = Nobody is paged; \"high\" = Everyone is paged."
            })
        );
        // Inside an `Option`: the enum is the non-null alternative.
        let secondary = &s["properties"]["secondary"]["anyOf"];
        assert_eq!(secondary[0]["enum"], json!(["low", "high"]), "{secondary}");
        assert_eq!(
            secondary[0]["description"],
            "How urgent an incident is. Values: \"low\" = Nobody is paged; \"high\" = Everyone is paged."
        );
        assert_eq!(secondary[1], json!({"type": "null"}));
        // An undocumented enum was a plain enum already.
        assert_eq!(s["properties"]["color"], json!({"type": "string", "enum": ["Red", "Green"]}));
    }

    #[test]
    fn constants_are_one_value_enums() {
        let def = fixtures::definition("incident.search", fixtures::schema::<Everything>());
        let s = &def.render(Provider::Gemini)["parametersJsonSchema"];
        let shape = &s["properties"]["shape"]["oneOf"];
        assert_eq!(shape[0]["properties"]["kind"], json!({"type": "string", "enum": ["circle"]}), "{shape}");
        assert_eq!(shape[1]["properties"]["kind"], json!({"type": "string", "enum": ["square"]}), "{shape}");
        fixtures::walk_schemas(s, &mut |node| assert!(node.get("const").is_none(), "{node}"));
        // A `const` next to an `enum` narrows it.
        let def = fixtures::definition(
            "pick.one",
            json!({"type": "object", "properties": {"a": {"enum": ["x", "y"], "const": "y"}, "b": {"const": null}}}),
        );
        let s = &def.render(Provider::Gemini)["parametersJsonSchema"];
        assert_eq!(s["properties"]["a"], json!({"enum": ["y"]}));
        assert_eq!(s["properties"]["b"], json!({"enum": [null]}));
    }
}
