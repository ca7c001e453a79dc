//! Ollama `/api/chat` `tools` entries.
//!
//! Ollama reads each tool's `parameters` into a fixed structure and silently loses what does not fit: a `$ref`
//! property becomes `{}`, and `oneOf`, `anyOf`, `allOf`, `const`, `format`, `pattern`, numeric bounds,
//! `minLength`/`maxLength`, `minItems`/`maxItems` and `default` are dropped. So the parameters keel sends are
//! rewritten into the subset that survives, and what would be lost is said in words instead:
//!
//! * every `$ref` is inlined; `$defs`, `$schema` and `title` go. A recursive type cannot be inlined: at the point
//!   where it would repeat, a stand-in `{"type": "object", "description": "... Recursive: same shape as `tree`."}`
//!   takes its place;
//! * an `Option<T>` (`anyOf [T, null]`, `"type": [t, "null"]`) becomes plain `T` (it is already absent from
//!   `required`);
//! * a unit enum becomes `{"type": "string", "enum": [...]}`, with the variants' doc comments in the description
//!   (`Values: "low" = Lowest; "high" = Highest.`);
//! * a data enum (tagged, untagged, externally tagged) becomes one object whose properties are all the variants'
//!   (the tag's values merged into one `enum`; `required` only what every variant requires), described as
//!   `One of: {kind: "circle", r} | {kind: "square", side}.`;
//! * constraints become description sentences: `Format: date-time. Minimum: 0. Pattern: ^INC-[0-9]+$.`; maps
//!   (`additionalProperties` with a schema) say `Map with any keys; each value: string.`
//! * Ollama keeps no `description` at the top of `parameters`, so the top level's (the args struct's doc comment,
//!   with the notes folded into it) joins the function's description as a paragraph of its own:
//!   `Look up one incident by its id.\n\nArguments: Which incident to look up.`
//!
//! The result is a description for the model, not a validator: the executor still validates the arguments
//! against the canonical schema, so anything the model gets wrong comes back as `invalid_arguments`.

use serde_json::{Value, json};

pub(super) use keel_tools_schema::dialect::ollama::{DROPPED, parameters};

/// `{"type": "function", "function": {"name", "description", "parameters"}}`.
pub(super) fn tool(name: &str, description: &str, canonical: &Value) -> Value {
    let mut parameters = parameters(canonical);
    let description = with_arguments_description(description, &mut parameters);
    json!({
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": parameters,
        }
    })
}

/// The tool's description followed by the top level's (`Arguments: ...`), which is taken out of the parameters:
/// Ollama keeps no `description` at the top of `parameters`, so the arguments' doc comment and the notes folded
/// there (a flattened enum's alternatives, a map's values) would never reach the model.
fn with_arguments_description(description: &str, parameters: &mut Value) -> String {
    let Some(Value::String(arguments)) = parameters.as_object_mut().and_then(|m| m.shift_remove("description")) else {
        return description.to_owned();
    };
    let (tool, arguments) = (description.trim(), arguments.trim());
    if arguments.is_empty() || arguments == tool {
        description.to_owned()
    } else if tool.is_empty() {
        format!("Arguments: {arguments}")
    } else {
        format!("{tool}\n\nArguments: {arguments}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tool_schemas::fixtures::{self, Everything, Node, walk_schemas};

    fn params_of<T: schemars::JsonSchema>() -> Value {
        let def = fixtures::definition("incident.search", fixtures::schema::<T>());
        let rendered = def.render(crate::Provider::Ollama).clone();
        assert_eq!(rendered["type"], "function");
        assert_eq!(rendered["function"]["name"], "incident.search");
        assert!(rendered["function"]["description"].as_str().is_some_and(|d| d.starts_with("Searches incidents.")));
        rendered["function"]["parameters"].clone()
    }

    #[test]
    fn the_arguments_description_joins_the_tool_description() {
        let def = fixtures::definition("incident.search", fixtures::schema::<Everything>());
        let function = &def.render(crate::Provider::Ollama)["function"];
        assert_eq!(
            function["description"],
            "Searches incidents.\n\nArguments: Search arguments exercising most of what schemars emits."
        );
        assert!(function["parameters"].get("description").is_none(), "{function}");
        // The notes folded into the top level travel with it.
        let def = fixtures::definition("shape.put", fixtures::schema::<fixtures::Flattened>());
        assert_eq!(
            def.render(crate::Provider::Ollama)["function"]["description"],
            "Searches incidents.\n\nArguments: A struct with a flattened internally tagged enum. One of: {kind: \"circle\", \
             radius} (A circle) | {kind: \"square\", side} (A square)."
        );
        // Without one, the tool's description is all there is.
        let def =
            fixtures::definition("plain.tool", json!({"type": "object", "properties": {"a": {"type": "string"}}}));
        assert_eq!(def.render(crate::Provider::Ollama)["function"]["description"], "Searches incidents.");
        let mut same = json!({"type": "object", "description": " Searches incidents. "});
        assert_eq!(with_arguments_description("Searches incidents.", &mut same), "Searches incidents.");
        let mut odd = json!({"type": "object", "description": 7});
        assert_eq!(with_arguments_description("", &mut odd), "");
        let mut only = json!({"type": "object", "description": "The id."});
        assert_eq!(with_arguments_description(" ", &mut only), "Arguments: The id.");
    }

    #[test]
    fn no_references_definitions_or_titles_anywhere() {
        let p = params_of::<Everything>();
        assert!(!fixtures::contains_key_anywhere(&p, "$ref"));
        assert!(!fixtures::contains_key_anywhere(&p, "$defs"));
        assert!(!fixtures::contains_key_anywhere(&p, "$schema"));
        walk_schemas(&p, &mut |s| {
            for k in ["title", "anyOf", "oneOf", "allOf", "const", "format", "pattern", "minimum", "maximum", "default"]
            {
                assert!(s.get(k).is_none(), "`{k}` left in {s}");
            }
            if let Some(t) = s.get("type").and_then(Value::as_array) {
                assert!(!t.iter().any(|t| t == "null"), "null type left in {s}");
            }
        });
        assert_eq!(p["type"], "object");
        assert!(p["required"].is_array());
    }

    #[test]
    fn optional_fields_are_plain_and_not_required() {
        let p = params_of::<Everything>();
        let required: Vec<&str> = p["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        assert!(!required.contains(&"maxCount"));
        assert!(!required.contains(&"work"));
        assert!(required.contains(&"homeAddress"));
        assert_eq!(p["properties"]["maxCount"]["type"], "integer");
        assert_eq!(p["properties"]["maxCount"]["description"], "At most this many. Minimum: 0.");
        // Option<struct>: the struct, inline.
        assert_eq!(p["properties"]["work"]["type"], "object");
        assert_eq!(p["properties"]["work"]["properties"]["street"]["type"], "string");
    }

    #[test]
    fn nested_structs_vecs_and_enums_are_inline_with_docs() {
        let p = params_of::<Everything>();
        let home = &p["properties"]["homeAddress"];
        assert_eq!(home["type"], "object");
        // The field's doc comment wins over the type's.
        assert_eq!(home["description"], "Where they live.");
        assert_eq!(home["properties"]["street"]["description"], "Street and number.");
        assert_eq!(home["required"], json!(["street"]));
        assert!(home.get("additionalProperties").is_none());

        let list = &p["properties"]["previous"];
        assert_eq!(list["type"], "array");
        assert_eq!(list["items"]["type"], "object");
        assert_eq!(list["items"]["properties"]["zip"]["type"], "string");

        let sev = &p["properties"]["severity"];
        assert_eq!(sev["type"], "string");
        assert_eq!(sev["enum"], json!(["low", "high"]));
        assert_eq!(
            sev["description"],
            "How bad it is. Values: \"low\" = Nobody is paged; \"high\" = Everyone is paged."
        );

        let plain = &p["properties"]["color"];
        assert_eq!(plain, &json!({"type": "string", "enum": ["Red", "Green"]}));

        // Option<unit enum>: still an enum, not required.
        assert_eq!(p["properties"]["secondary"]["enum"], json!(["low", "high"]));
    }

    #[test]
    fn constraints_are_folded_into_descriptions() {
        let p = params_of::<Everything>();
        assert_eq!(p["properties"]["ticket"]["description"], "The ticket id. Pattern: ^INC-[0-9]+$.");
        assert_eq!(p["properties"]["since"]["description"], "Format: date-time.");
        assert_eq!(p["properties"]["limit"]["description"], "Minimum: 1. Maximum: 100. Default: 10.");
        assert_eq!(p["properties"]["small"]["description"], "Minimum: 0. Maximum: 255.");
        assert_eq!(p["properties"]["title"]["description"], "Minimum length: 1. Maximum length: 80.");
        assert_eq!(p["properties"]["labels"]["description"], "Map with any keys; each value: string.");
        assert_eq!(p["properties"]["labels"]["type"], "object");
        assert_eq!(p["properties"]["pair"]["description"], "Tuple: [string, integer].");
        // A property named like a keyword is still a property.
        assert_eq!(p["properties"]["title"]["type"], "string");
    }

    #[test]
    fn data_enums_become_one_object_with_a_note() {
        let p = params_of::<Everything>();
        let shape = &p["properties"]["shape"];
        assert_eq!(shape["type"], "object");
        assert_eq!(shape["properties"]["kind"]["enum"], json!(["circle", "square"]));
        assert_eq!(shape["required"], json!(["kind"]));
        assert_eq!(
            shape["description"],
            "One of: {kind: \"circle\", radius} (A circle) | {kind: \"square\", side} (A square)."
        );
        let id = &p["properties"]["id"];
        assert_eq!(id["type"], json!(["integer", "string"]));
        assert_eq!(id["description"], "One of: integer | string.");
    }

    #[test]
    fn flattened_enum_merges_into_the_struct() {
        let p = params_of::<fixtures::Flattened>();
        assert_eq!(p["type"], "object");
        assert_eq!(p["required"], json!(["top", "kind"]));
        assert_eq!(p["properties"]["kind"]["enum"], json!(["circle", "square"]));
        assert_eq!(p["properties"]["top"]["type"], "string");
        assert!(p.get("unevaluatedProperties").is_none());
        assert!(p.get("oneOf").is_none());
    }

    #[test]
    fn recursion_is_cut_with_a_stand_in() {
        let p = params_of::<Everything>();
        let children = &p["properties"]["tree"]["properties"]["children"];
        assert_eq!(children["type"], "array");
        assert_eq!(
            children["items"],
            json!({"type": "object", "description": "A tree. Recursive: same shape as `tree`."})
        );

        // Recursion through the root.
        let p = params_of::<Node>();
        assert_eq!(
            p["properties"]["children"]["items"],
            json!({"type": "object", "description": "A tree. Recursive: same shape as the top-level arguments."})
        );
    }

    #[test]
    fn hostile_inputs_do_not_panic() {
        for s in fixtures::hostile_schemas() {
            let _ = parameters(&s);
        }
    }
}
