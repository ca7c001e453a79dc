//! Gemini `functionDeclarations` entries: `{"name", "description", "parametersJsonSchema"}`.
//!
//! `parametersJsonSchema` (unlike the older OpenAPI-subset `parameters`) takes JSON Schema, `$defs`/`$ref`
//! included. keel still inlines references, which every Gemini model handles best, keeping `$defs` only for a
//! recursive type; `$schema` is removed. Gemini generates an object's properties in the order of their keys there,
//! which is the declaration order (its `propertyOrdering` belongs to the OpenAPI-subset `parameters`: the SDK's model
//! of `parametersJsonSchema` refuses it). The name is the
//! [`ToolDefinition::wire_name`](crate::ToolDefinition::wire_name).

use serde_json::{Value, json};

use super::transform;

/// `{"name", "description", "parametersJsonSchema"}`.
pub(crate) fn declaration(wire_name: &str, description: &str, canonical: &Value) -> Value {
    json!({
        "name": wire_name,
        "description": description,
        "parametersJsonSchema": transform::inline_for_json_schema(canonical),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::schema::Provider;
    use crate::schema::fixtures::{self, Everything};

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
}
