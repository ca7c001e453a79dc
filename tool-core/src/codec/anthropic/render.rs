//! Anthropic Messages `tools` entries: `{"name", "description", "input_schema", "input_examples"?}`.
//!
//! Anthropic takes JSON Schema as it is, so `input_schema` is the canonical input schema with references inlined
//! (a recursive type keeps its definition under `$defs`) and without `$schema`. The name is the
//! [`ToolDefinition::wire_name`](crate::definition::ToolDefinition::wire_name): Anthropic accepts only
//! `^[a-zA-Z0-9_-]{1,64}$`. A tool's examples are `input_examples`, a list of input objects; a tool without
//! examples has no `input_examples`.

use serde_json::{Value, json};

use keel_tools_schema::transform;

/// `{"name", "description", "input_schema", "input_examples"?}`.
pub(super) fn tool(wire_name: &str, description: &str, canonical: &Value, examples: &[Value]) -> Value {
    let mut entry = json!({
        "name": wire_name,
        "description": description,
        "input_schema": transform::inline_for_json_schema(canonical),
    });
    if !examples.is_empty()
        && let Value::Object(map) = &mut entry
    {
        map.insert("input_examples".to_owned(), Value::Array(examples.to_vec()));
    }
    entry
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::tool_schemas::Provider;
    use crate::tool_schemas::fixtures::{self, Everything, Node};

    #[test]
    fn wire_name_and_inlined_input_schema() {
        let def = fixtures::definition("incident.search", fixtures::schema::<Everything>());
        let t = def.render(Provider::Anthropic);
        assert_eq!(t["name"], "incident-search");
        assert_eq!(t["description"], "Searches incidents.");
        let s = &t["input_schema"];
        assert!(s.get("$schema").is_none());
        assert_eq!(s["type"], "object");
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(s["properties"]["homeAddress"]["properties"]["street"]["type"], "string");
        assert_eq!(s["properties"]["homeAddress"]["additionalProperties"], false);
        // Only the recursive definition is kept.
        assert_eq!(
            s["$defs"].as_object().map(|d| d.keys().cloned().collect::<Vec<_>>()),
            Some(vec!["Node".to_owned()])
        );
        assert_eq!(s["properties"]["tree"]["properties"]["children"]["items"], json!({"$ref": "#/$defs/Node"}));
        // The Option keeps its null alternative: Anthropic understands it.
        assert_eq!(s["properties"]["maxCount"]["type"], json!(["integer", "null"]));
    }

    #[test]
    fn root_recursion_keeps_the_root_reference() {
        let def = fixtures::definition("tree.put", fixtures::schema::<Node>());
        let s = &def.render(Provider::Anthropic)["input_schema"];
        assert_eq!(s["properties"]["children"]["items"], json!({"$ref": "#"}));
        assert!(s.get("$defs").is_none());
    }
}
