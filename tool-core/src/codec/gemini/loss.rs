//! What Gemini's entries do not carry: a name it refuses, the wire name, and what the schema has outside Gemini's
//! documented JSON Schema subset.

use serde_json::Value;

use crate::codec::LossKind;
use crate::codec::format::Push;
use crate::codec::loss::{join_keywords, show_path, walk, wire_name_loss};
use crate::tool_definition::ToolDefinition;
use keel_tools_schema::transform::NUMERIC_FORMATS;
use keel_tools_schema::vocabulary;

/// The keywords of Gemini's documented JSON Schema subset for `parametersJsonSchema`: `type` (string, number,
/// integer, boolean, object, array, null), `title`, `description`; for objects `properties`, `required`,
/// `additionalProperties`; for strings `enum` and `format` ([`FORMATS`]); for numbers `enum`, `minimum`,
/// `maximum`; for arrays `items`, `prefixItems`, `minItems`, `maxItems`; and `anyOf`, `$ref`, `$defs`. Gemini
/// ignores the others.
const SUPPORTED: &[&str] = &[
    "type",
    "title",
    "description",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "format",
    "minimum",
    "maximum",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "anyOf",
    "$ref",
    "$defs",
    "definitions",
];

/// The string formats Gemini documents.
const FORMATS: &[&str] = &["date-time", "date", "time"];

/// Whether Gemini takes `wire` as a function name: it starts with a letter or an underscore, contains letters,
/// digits, underscores, dots, colons and dashes, and is at most 64 characters.
fn name_ok(wire: &str) -> bool {
    let mut chars = wire.chars();
    wire.len() <= 64
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}

/// The entry's losses: a name Gemini refuses, the wire name, and what the schema has outside Gemini's subset.
pub(super) fn entry_losses(def: &ToolDefinition, entry: &Value, push: &mut Push<'_>) {
    if !name_ok(def.wire_name()) {
        push(
            "/name".to_owned(),
            LossKind::Rejected,
            format!(
                "Gemini rejects the name `{}`: a function name starts with a letter or `_`, has only letters, \
                 digits, `_`, `.`, `:` and `-`, and is at most 64 characters",
                def.wire_name()
            ),
        );
    }
    wire_name_loss(def, "Gemini", "/name", push);
    let Some(schema) = entry.get("parametersJsonSchema") else { return };
    walk(schema, &mut |path, pointer, map| {
        let at = format!("/parametersJsonSchema{pointer}");
        let mut validation = Vec::new();
        let mut annotations = Vec::new();
        for (k, v) in map {
            let k = k.as_str();
            if SUPPORTED.contains(&k) {
                if k == "format"
                    && let Value::String(f) = v
                    && !FORMATS.contains(&f.as_str())
                    && !NUMERIC_FORMATS.contains(&f.as_str())
                {
                    validation.push(k);
                }
                continue;
            }
            match (k, v) {
                ("uniqueItems" | "deprecated", Value::Bool(false)) => {}
                _ if vocabulary::asserts_nothing(k) => annotations.push(k),
                _ => validation.push(k),
            }
        }
        validation.sort_unstable();
        annotations.sort_unstable();
        if !validation.is_empty() {
            push(
                at.clone(),
                LossKind::Dropped,
                format!(
                    "{}: {} {} outside Gemini's documented JSON Schema subset and is ignored; the model does not \
                     see it, the executor still enforces it",
                    show_path(path),
                    join_keywords(&validation),
                    if validation.len() == 1 { "is" } else { "are" }
                ),
            );
        }
        if !annotations.is_empty() {
            push(
                at.clone(),
                LossKind::Ignored,
                format!("{}: Gemini ignores the annotation(s) {}", show_path(path), join_keywords(&annotations)),
            );
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            let odd: Vec<String> =
                values.iter().filter(|v| !(v.is_string() || v.is_number())).map(|v| v.to_string()).collect();
            if !odd.is_empty() {
                push(
                    format!("{at}/enum"),
                    LossKind::Dropped,
                    format!(
                        "{}: Gemini documents enum values as strings or numbers; {} may be dropped",
                        show_path(path),
                        odd.join(", ")
                    ),
                );
            }
        }
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_gemini_takes() {
        assert!(super::name_ok("incident-search"));
        assert!(super::name_ok("_x.y:z"));
        assert!(!super::name_ok("1abc"));
        assert!(!super::name_ok(&"a".repeat(65)));
    }
}
