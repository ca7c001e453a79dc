//! What the generator reads of a schema's keywords: which assert (from the vocabulary), which of those it
//! generates for, and local `$ref`s.

use serde_json::{Map, Value};

use super::{Gen, Mode, R, Unsupported};
use crate::imports::vocabulary;

/// The assertions this generator understands. A schema with any other assertion (`is_assertion`) is
/// [`Unsupported`].
const UNDERSTOOD: &[&str] = &[
    "$ref",
    "type",
    "enum",
    "const",
    "allOf",
    "anyOf",
    "oneOf",
    "properties",
    "required",
    "additionalProperties",
    "unevaluatedProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
];

/// Whether `key` is a keyword that can refuse a value: a validation keyword, an applicator or a reference.
/// Annotations (the content keywords among them, which draft 2020-12 does not assert), core keywords and keywords
/// outside the vocabulary (`x-...`, OpenAPI's `nullable`) are ignored, as the validator ignores them.
pub(super) fn is_assertion(key: &str) -> bool {
    vocabulary::kind(key).is_some() && !vocabulary::asserts_nothing(key)
}

/// Whether `m` holds constraining keywords other than `except`.
pub(super) fn asserts_beside(m: &Map<String, Value>, except: &[&str]) -> bool {
    m.keys().any(|k| is_assertion(k) && !except.contains(&k.as_str()))
}

impl<'a> Gen<'a> {
    /// The schema a local `$ref` names, and its pointer.
    pub(super) fn resolve(&self, reference: &Value, pointer: &str) -> R<(&'a Value, String)> {
        let reference = reference.as_str().ok_or_else(|| Unsupported::new(pointer, "a `$ref` that is not a string"))?;
        vocabulary::resolve_ref(self.root, reference).ok_or_else(|| {
            let why = if !reference.starts_with('#') {
                "is not local to the schema"
            } else if vocabulary::local_pointer(reference).is_none() {
                "names an anchor"
            } else {
                "leads nowhere"
            };
            Unsupported::new(pointer, format!("the `$ref` {reference:?} {why}"))
        })
    }

    /// Follows a chain of `$ref`-only schemas.
    pub(super) fn resolve_chain(&self, mut schema: &'a Value, mut pointer: String) -> R<(&'a Value, String)> {
        for _ in 0..32 {
            match schema {
                Value::Object(m) if m.contains_key("$ref") && !asserts_beside(m, &["$ref"]) => {
                    let (next, p) = self.resolve(&m["$ref"], &pointer)?;
                    schema = next;
                    pointer = p;
                }
                _ => return Ok((schema, pointer)),
            }
        }
        Err(Unsupported::new(&pointer, "a cycle of `$ref`s"))
    }

    /// Refuses, unless lenient, a node with an assertion the generator does not understand.
    pub(super) fn check_keywords(&self, m: &Map<String, Value>, pointer: &str) -> R<()> {
        if self.mode == Mode::Lenient {
            return Ok(());
        }
        if let Some(k) = m.keys().find(|k| is_assertion(k) && !UNDERSTOOD.contains(&k.as_str())) {
            return Err(Unsupported::new(pointer, format!("the keyword `{k}` is not understood by the generator")));
        }
        if let Some(u) = m.get("unevaluatedProperties")
            && u != &Value::Bool(false)
        {
            return Err(Unsupported::new(pointer, "`unevaluatedProperties` other than `false`"));
        }
        if let Some(Value::Array(_)) = m.get("items") {
            return Err(Unsupported::new(pointer, "a draft-07 tuple (`items` as a list)"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_keyword_understood_is_an_assertion_of_the_vocabulary() {
        for k in UNDERSTOOD {
            assert!(is_assertion(k), "{k}");
        }
        for k in ["not", "if", "patternProperties", "contains", "dependentRequired", "$dynamicRef"] {
            assert!(is_assertion(k) && !UNDERSTOOD.contains(&k), "{k}");
        }
        for k in ["description", "default", "$defs", "contentMediaType", "x-keel-content", "nullable"] {
            assert!(!is_assertion(k), "{k}");
        }
    }
}
