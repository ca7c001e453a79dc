//! Strict mode: the `parameters` both OpenAI APIs are sent, strict whenever the schema allows it. The conversion
//! is [`keel_tools_schema::dialect::openai_strict`]; these tests check it through the codec, on real Rust types.

pub(super) use keel_tools_schema::dialect::openai_strict::{FOLDED, STRICT_FORMATS, parameters};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use keel_tools_schema::transform;
    use serde_json::Value;

    use super::*;
    use crate::Provider;
    use crate::definition::ToolDefinition;
    use crate::tool_schemas::fixtures::{self, Everything, Labelled, Node, Strictable, walk_schemas};

    /// Every object closed, every property required, no keyword strict mode rejects.
    fn assert_strict_rules(schema: &Value) {
        walk_schemas(schema, &mut |s| {
            for k in ["$ref", "$defs", "oneOf", "allOf", "const", "default", "minLength", "maxLength", "prefixItems"] {
                assert!(s.get(k).is_none(), "`{k}` in strict schema: {s}");
            }
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                assert_eq!(s["additionalProperties"], false, "open object: {s}");
                let required: Vec<&str> =
                    s["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                let keys: Vec<&str> = props.keys().map(String::as_str).collect();
                assert_eq!(required, keys, "required != properties in {s}");
            }
            if s.get("type").and_then(Value::as_str) == Some("object") {
                assert_eq!(s["additionalProperties"], false, "open object: {s}");
            }
            if let Some(f) = s.get("format").and_then(Value::as_str) {
                assert!(STRICT_FORMATS.contains(&f), "format {f} not allowed");
            }
        });
    }

    fn strict_def() -> ToolDefinition {
        fixtures::definition("incident.search", fixtures::schema::<Strictable>())
    }

    #[test]
    fn strict_schema_satisfies_the_rules() {
        let def = strict_def();
        assert_eq!(def.openai_strictness(), Ok(()));
        let chat = def.render(Provider::OpenAiChat);
        assert_eq!(chat["type"], "function");
        assert_eq!(chat["function"]["name"], "incident-search");
        assert_eq!(chat["function"]["description"], "Searches incidents.");
        assert_eq!(chat["function"]["strict"], true);
        let p = &chat["function"]["parameters"];
        assert_strict_rules(p);
        assert!(p.get("$schema").is_none());

        let responses = def.render(Provider::OpenAiResponses);
        assert_eq!(responses["type"], "function");
        assert_eq!(responses["name"], "incident-search");
        assert_eq!(responses["strict"], true);
        assert_eq!(&responses["parameters"], p);
    }

    #[test]
    fn formerly_optional_fields_accept_null() {
        let def = strict_def();
        let p = &def.render(Provider::OpenAiChat)["function"]["parameters"];
        let root = Value::Null;
        // Option<u32>: a type union with null.
        assert_eq!(p["properties"]["maxCount"]["type"], json!(["integer", "null"]));
        // Option<struct>: an anyOf with null.
        assert!(transform::accepts_null(&root, &p["properties"]["work"]));
        assert_eq!(p["properties"]["work"]["anyOf"][1], json!({"type": "null"}));
        assert_strict_rules(&p["properties"]["work"]["anyOf"][0]);
        // #[serde(default)] field: was optional and not nullable; now required and nullable.
        assert_eq!(p["properties"]["limit"]["type"], json!(["integer", "null"]));
        assert_eq!(p["properties"]["limit"]["description"], "Default: 10.");
        assert_eq!(p["properties"]["verbose"]["type"], json!(["boolean", "null"]));
        // Option<unit enum with docs>: one flat union of the values and null, with the type's doc.
        let secondary = &p["properties"]["secondary"];
        assert!(transform::accepts_null(&root, secondary), "{secondary}");
        assert_eq!(secondary["anyOf"].as_array().map(Vec::len), Some(3), "{secondary}");
        assert_eq!(
            secondary["anyOf"][0],
            json!({"type": "string", "enum": ["low"], "description": "Nobody is paged."})
        );
        assert_eq!(secondary["description"], "How urgent an incident is.");
        // A required field is not nullable.
        assert!(!transform::accepts_null(&root, &p["properties"]["homeAddress"]));
        assert!(!transform::accepts_null(&root, &p["properties"]["homeAddress"]["properties"]["street"]));
        // A nested optional field is nullable and required.
        assert!(transform::accepts_null(&root, &p["properties"]["homeAddress"]["properties"]["zip"]));
    }

    #[test]
    fn strict_keeps_supported_constraints_and_folds_the_rest() {
        let def = strict_def();
        let p = &def.render(Provider::OpenAiChat)["function"]["parameters"];
        assert_eq!(p["properties"]["ticket"]["pattern"], "^INC-[0-9]+$");
        assert_eq!(p["properties"]["since"]["format"], "date-time");
        assert_eq!(p["properties"]["small"]["maximum"], 255);
        assert!(p["properties"]["small"].get("format").is_none());
        // A width format's range is stated as bounds; bounds of the user's own are kept.
        assert_eq!(p["properties"]["maxCount"]["minimum"], 0);
        assert_eq!(p["properties"]["maxCount"]["maximum"], u32::MAX);
        assert!(p["properties"]["maxCount"].get("format").is_none());
        assert_eq!(
            (&p["properties"]["limit"]["minimum"], &p["properties"]["limit"]["maximum"]),
            (&json!(1), &json!(100))
        );
        assert_eq!(p["properties"]["title"]["description"], "Minimum length: 1. Maximum length: 80.");
        // Tagged enum: anyOf of closed objects.
        let shape = &p["properties"]["shape"]["anyOf"];
        assert_eq!(shape[0]["properties"]["kind"]["enum"], json!(["circle"]));
        assert_eq!(shape[1]["properties"]["kind"]["enum"], json!(["square"]));
    }

    #[test]
    fn a_map_is_not_strict_and_says_why() {
        let def = fixtures::definition("incident.label", fixtures::schema::<Labelled>());
        let reason = def.openai_strictness().err().unwrap_or_default();
        assert_eq!(
            reason,
            "field `labels` is a map (additionalProperties is a schema); OpenAI strict mode needs every object closed"
        );
        let chat = def.render(Provider::OpenAiChat);
        assert_eq!(chat["function"]["strict"], false);
        // Unchanged apart from inlining.
        let p = &chat["function"]["parameters"];
        assert!(!fixtures::contains_key_anywhere(p, "$ref"));
        assert_eq!(p["properties"]["labels"]["additionalProperties"], json!({"type": "string"}));
        assert_eq!(p["properties"]["owner"]["properties"]["zip"]["type"], json!(["string", "null"]));
        assert_eq!(def.render(Provider::OpenAiResponses)["strict"], false);
    }

    #[test]
    fn a_recursive_type_is_not_strict_and_says_why() {
        let def = fixtures::definition("tree.put", fixtures::schema::<Node>());
        assert_eq!(
            def.openai_strictness(),
            Err("field `children[]` is recursive (same shape as the top-level arguments); keel inlines definitions \
                 for OpenAI, and a recursive type cannot be inlined"
                .to_owned())
        );
        let p = &def.render(Provider::OpenAiChat)["function"]["parameters"];
        assert_eq!(p["properties"]["children"]["items"]["$ref"], "#");

        let def = fixtures::definition("incident.search", fixtures::schema::<Everything>());
        let reason = def.openai_strictness().err().unwrap_or_default();
        assert!(reason.starts_with("field `tree.children[]` is recursive (same shape as `tree`)"), "{reason}");
        let p = &def.render(Provider::OpenAiChat)["function"]["parameters"];
        assert_eq!(p["properties"]["tree"]["properties"]["children"]["items"]["$ref"], "#/$defs/Node");
        assert!(p["$defs"]["Node"]["properties"]["children"].is_object());
        assert!(p["$defs"].get("Address").is_none());
    }

    #[test]
    fn other_reasons() {
        let cases = [
            (json!({"type": "object", "properties": {"v": true}}), "field `v` accepts any JSON value"),
            (
                json!({"type": "object", "properties": {"o": {"type": "object"}}}),
                "field `o` is an object with unspecified",
            ),
            (
                json!({"type": "object", "properties": {"t": {"type": "array", "prefixItems": [{"type": "string"}]}}}),
                "field `t` is a tuple",
            ),
            (json!({"type": "object", "properties": {"n": {"type": "string", "not": {"const": "x"}}}}), "uses `not`"),
            (json!({"type": "object", "properties": {"a": {"type": "array"}}}), "array of unspecified items"),
            (json!({"type": "string"}), "the top-level arguments are not a single object schema"),
            (
                json!({"type": "object", "properties": {"u": {"anyOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
                    {"type": "object", "properties": {"a": {"type": "string"}, "c": {"type": "string"}}}
                ]}}}),
                "start with the same property `a`",
            ),
            (json!({"type": "object", "properties": {"r": {"$ref": "other.json"}}}), "cannot be resolved"),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "ghost"]}),
                "the top-level arguments object requires `ghost` without describing it",
            ),
            (json!({"type": "object", "anyOf": [{"properties": {}}]}), "(they are a union"),
        ];
        for (schema, expected) in cases {
            let p = parameters(&schema);
            let reason = p.strict.err().unwrap_or_default();
            assert!(reason.contains(expected), "{schema}: {reason}");
        }
    }

    #[test]
    fn a_flattened_enum_at_the_top_level_is_not_strict() {
        let def = fixtures::definition("shape.put", fixtures::schema::<fixtures::Flattened>());
        let reason = def.openai_strictness().err().unwrap_or_default();
        assert!(
            reason.starts_with("the top-level arguments are not a single object schema (they are a union"),
            "{reason}"
        );
        assert_eq!(def.render(Provider::OpenAiChat)["function"]["strict"], false);
    }

    #[test]
    fn limits_are_checked() {
        let mut schema = json!({"type": "string"});
        for _ in 0..11 {
            schema = json!({"type": "object", "properties": {"x": schema}});
        }
        let reason = parameters(&schema).strict.err().unwrap_or_default();
        assert!(reason.contains("nests objects 11 levels deep"), "{reason}");

        let values: Vec<String> = (0..1200).map(|i| format!("v{i}")).collect();
        let schema =
            json!({"type": "object", "properties": {"e": {"type": "string", "enum": values}}, "required": ["e"]});
        let reason = parameters(&schema).strict.err().unwrap_or_default();
        assert!(reason.contains("1200 enum values"), "{reason}");
    }

    #[test]
    fn flattened_enum_distributes_the_struct_fields() {
        let nested = json!({
            "type": "object",
            "properties": {"outer": {
                "type": "object",
                "properties": {"top": {"type": "string"}},
                "required": ["top"],
                "oneOf": [
                    {"type": "object", "properties": {"kind": {"const": "a", "type": "string"}}, "required": ["kind"]},
                    {"type": "object", "properties": {"kind": {"const": "b", "type": "string"}, "x": {"type": "integer"}},
                     "required": ["kind"]}
                ]
            }},
            "required": ["outer"]
        });
        let mut canonical = nested;
        transform::close_objects(&mut canonical);
        let p = parameters(&canonical);
        assert_eq!(p.strict, Ok(()));
        assert_strict_rules(&p.parameters);
        let branches = &p.parameters["properties"]["outer"]["anyOf"];
        assert_eq!(branches[0]["required"], json!(["kind", "top"]));
        assert_eq!(branches[1]["properties"]["x"]["type"], json!(["integer", "null"]));
    }

    #[test]
    fn hostile_inputs_do_not_panic() {
        for s in fixtures::hostile_schemas() {
            let p = parameters(&s);
            if p.strict.is_ok() {
                assert_strict_rules(&p.parameters);
            }
        }
    }
}
