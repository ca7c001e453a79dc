//! What is indexed for one tool.

use std::collections::HashMap;

use serde_json::Value;

/// What is indexed for one tool: its name, its description and its parameters (each a name and its docs).
///
/// Build one by hand with [`Document::new`] and [`Document::with_param`], or from the tool's input schema with
/// [`Document::from_schema`].
///
/// ```
/// use keel_tools_search::Document;
///
/// let doc = Document::new("incident.lookup", "Look up an incident.")
///     .with_param("id", "The incident's id, e.g. INC-1234.")
///     .with_param("include_timeline", "Also return the incident's events.");
/// assert_eq!(doc.name(), "incident.lookup");
/// assert_eq!(doc.params().len(), 2);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Document {
    name: String,
    description: String,
    params: Vec<(String, String)>,
}

impl Document {
    /// A document with a name and a description, and no parameters.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Document { name: name.into(), description: description.into(), params: Vec::new() }
    }

    /// Adds a parameter: its name (`invoice_id`) and its docs (title, description, enum values: any text).
    #[must_use]
    pub fn with_param(mut self, name: impl Into<String>, doc: impl Into<String>) -> Self {
        self.params.push((name.into(), doc.into()));
        self
    }

    /// A document whose parameters are read from a JSON Schema (the tool's input schema).
    ///
    /// Every property found is a parameter, named by its key, with its docs: the `title` and `description` of
    /// its schema, and its `enum` and `const` string values. The walk goes into
    ///
    /// - `properties` (each a parameter), `patternProperties` and `additionalProperties`;
    /// - `items` (a schema or, as in draft 4, an array of them) and `prefixItems`;
    /// - `anyOf`, `oneOf` and `allOf`;
    /// - `$ref`s within the document (`#/$defs/...`, `#/definitions/...`, any JSON pointer after `#`); other
    ///   references are not followed.
    ///
    /// The docs found below a property (in its `items`, its `anyOf` branches, the schema its `$ref` names) are
    /// that property's docs: `{"tags": {"type": "array", "items": {"description": "A label"}}}` gives the
    /// parameter `tags` with the docs `A label`. A property met twice (in two branches, or at two depths) is one
    /// parameter with the docs of both. The schema's own `title` and `description` are left out (the tool's
    /// description says that).
    ///
    /// Any JSON value is accepted: a schema that is not an object (such as `true`) has no parameters, and keys of
    /// the wrong type are skipped. A reference is not followed again inside itself (cycles end there), and the
    /// walk stops at a depth of 64 or after 10,000 schemas, so a hostile schema costs bounded time.
    ///
    /// ```
    /// use keel_tools_search::Document;
    /// use serde_json::json;
    ///
    /// let schema = json!({
    ///     "type": "object",
    ///     "properties": {
    ///         "invoice_id": {"type": "string", "description": "The invoice to refund."},
    ///         "reason": {"$ref": "#/$defs/Reason"}
    ///     },
    ///     "$defs": {
    ///         "Reason": {"title": "Why", "enum": ["duplicate", "fraud"]}
    ///     }
    /// });
    /// let doc = Document::from_schema("billing.invoice.refund", "Refund an invoice.", &schema);
    /// let params: Vec<(&str, &str)> = doc.params().collect();
    /// assert_eq!(params, [("invoice_id", "The invoice to refund."), ("reason", "Why duplicate fraud")]);
    /// ```
    pub fn from_schema(name: impl Into<String>, description: impl Into<String>, input_schema: &Value) -> Self {
        let mut walker = Walker {
            root: input_schema,
            params: Vec::new(),
            by_name: HashMap::new(),
            refs: Vec::new(),
            budget: MAX_SCHEMAS,
        };
        walker.visit(input_schema, None, 0);
        let params = walker.params.into_iter().map(|(name, docs)| (name.to_owned(), docs.join(" "))).collect();
        Document { name: name.into(), description: description.into(), params }
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tool's description.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The parameters, in order: each its name and its docs.
    pub fn params(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.params.iter().map(|(n, d)| (n.as_str(), d.as_str()))
    }

    /// The text given to an [`Embedder`](crate::Embedder) for this document: the name, a colon and the
    /// description on the first line, then one line per parameter, `name: docs`.
    ///
    /// ```
    /// use keel_tools_search::Document;
    ///
    /// let doc = Document::new("incident.lookup", "Look up an incident.").with_param("id", "The incident id.");
    /// assert_eq!(doc.embedding_text(), "incident.lookup: Look up an incident.\nid: The incident id.");
    /// ```
    pub fn embedding_text(&self) -> String {
        let mut s = format!("{}: {}", self.name, self.description);
        for (name, doc) in &self.params {
            s.push('\n');
            s.push_str(name);
            if !doc.is_empty() {
                s.push_str(": ");
                s.push_str(doc);
            }
        }
        s
    }
}

const MAX_DEPTH: usize = 64;
const MAX_SCHEMAS: usize = 10_000;

struct Walker<'a> {
    root: &'a Value,
    /// Each parameter: its name and its pieces of docs (distinct, in the order found).
    params: Vec<(&'a str, Vec<&'a str>)>,
    by_name: HashMap<&'a str, usize>,
    /// The references being followed, innermost last.
    refs: Vec<&'a str>,
    /// How many more schemas may be visited.
    budget: usize,
}

impl<'a> Walker<'a> {
    /// Visits `schema`, whose docs belong to the parameter `owner` (none at the top).
    fn visit(&mut self, schema: &'a Value, owner: Option<usize>, depth: usize) {
        if depth > MAX_DEPTH || self.budget == 0 {
            return;
        }
        self.budget -= 1;
        let Value::Object(obj) = schema else { return };
        if let Some(owner) = owner {
            for key in ["title", "description"] {
                if let Some(Value::String(s)) = obj.get(key) {
                    self.add_doc(owner, s);
                }
            }
            if let Some(Value::Array(values)) = obj.get("enum") {
                for v in values {
                    if let Value::String(s) = v {
                        self.add_doc(owner, s);
                    }
                }
            }
            if let Some(Value::String(s)) = obj.get("const") {
                self.add_doc(owner, s);
            }
        }
        if let Some(Value::String(r)) = obj.get("$ref") {
            self.follow(r, owner, depth);
        }
        if let Some(Value::Object(props)) = obj.get("properties") {
            for (key, sub) in props {
                let param = self.param(key);
                self.visit(sub, Some(param), depth + 1);
            }
        }
        if let Some(Value::Object(props)) = obj.get("patternProperties") {
            for sub in props.values() {
                self.visit(sub, owner, depth + 1);
            }
        }
        for key in ["additionalProperties", "items"] {
            match obj.get(key) {
                Some(sub @ Value::Object(_)) => self.visit(sub, owner, depth + 1),
                Some(Value::Array(subs)) if key == "items" => {
                    for sub in subs {
                        self.visit(sub, owner, depth + 1);
                    }
                }
                _ => {}
            }
        }
        for key in ["prefixItems", "anyOf", "oneOf", "allOf"] {
            if let Some(Value::Array(subs)) = obj.get(key) {
                for sub in subs {
                    self.visit(sub, owner, depth + 1);
                }
            }
        }
    }

    fn follow(&mut self, reference: &'a str, owner: Option<usize>, depth: usize) {
        let Some(pointer) = reference.strip_prefix('#') else { return };
        if self.refs.contains(&reference) {
            return;
        }
        let Some(target) = self.root.pointer(pointer) else { return };
        self.refs.push(reference);
        self.visit(target, owner, depth + 1);
        self.refs.pop();
    }

    fn param(&mut self, name: &'a str) -> usize {
        *self.by_name.entry(name).or_insert_with(|| {
            self.params.push((name, Vec::new()));
            self.params.len() - 1
        })
    }

    fn add_doc(&mut self, owner: usize, text: &'a str) {
        let text = text.trim();
        let docs = &mut self.params[owner].1;
        if !text.is_empty() && !docs.contains(&text) {
            docs.push(text);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The parameters found, sorted (without serde_json's `preserve_order`, properties come sorted by key).
    fn params(schema: &Value) -> Vec<(String, String)> {
        let mut params: Vec<(String, String)> =
            Document::from_schema("t", "", schema).params().map(|(n, d)| (n.to_owned(), d.to_owned())).collect();
        params.sort();
        params
    }

    #[test]
    fn walks_nested_objects_arrays_and_combinators() {
        let schema = json!({
            "type": "object",
            "description": "ignored",
            "properties": {
                "customer": {
                    "type": "object",
                    "title": "Customer",
                    "properties": {"email": {"type": "string", "description": "Billing email."}}
                },
                "lines": {
                    "type": "array",
                    "description": "Invoice lines.",
                    "items": {"type": "object", "properties": {"sku": {"description": "Stock unit."}}}
                },
                "when": {"anyOf": [{"type": "string", "description": "ISO 8601 date."}, {"type": "null"}]},
                "mode": {"oneOf": [{"const": "fast"}, {"const": "safe", "description": "Checks first."}]},
                "extra": {"allOf": [{"properties": {"note": {"title": "Note"}}}]}
            }
        });
        assert_eq!(
            params(&schema),
            [
                ("customer", "Customer"),
                ("email", "Billing email."),
                ("extra", ""),
                ("lines", "Invoice lines."),
                ("mode", "fast Checks first. safe"),
                ("note", "Note"),
                ("sku", "Stock unit."),
                ("when", "ISO 8601 date."),
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
    }

    #[test]
    fn follows_refs_and_stops_at_cycles() {
        let schema = json!({
            "properties": {"root": {"$ref": "#/definitions/Node"}, "other": {"$ref": "#/$defs/Missing"}},
            "definitions": {
                "Node": {
                    "description": "A tree node.",
                    "properties": {"children": {"type": "array", "items": {"$ref": "#/definitions/Node"}}}
                }
            }
        });
        assert_eq!(
            params(&schema),
            // `children` refers to `Node` from inside it: not followed again.
            [("children", ""), ("other", ""), ("root", "A tree node.")].map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
        // A reference to the whole document, from inside it.
        let schema = json!({"properties": {"a": {"$ref": "#"}}});
        assert_eq!(params(&schema), [("a".to_owned(), String::new())]);
    }

    #[test]
    fn bounded_on_exponential_refs_and_deep_nesting() {
        // Each definition refers to the next one twice: 2^20 paths without a bound.
        let mut defs = serde_json::Map::new();
        for i in 0..20 {
            let next = format!("#/$defs/d{}", i + 1);
            defs.insert(
                format!("d{i}"),
                json!({"properties": {format!("p{i}"): {"anyOf": [{"$ref": next}, {"$ref": next}]}}}),
            );
        }
        let schema = json!({"$ref": "#/$defs/d0", "$defs": defs});
        assert_eq!(params(&schema).len(), 20);

        // Built by hand: `json!` would copy `deep` recursively.
        let mut deep = json!({"description": "bottom"});
        for _ in 0..10_000 {
            deep = Value::Object(serde_json::Map::from_iter([("items".to_owned(), deep)]));
        }
        let props = Value::Object(serde_json::Map::from_iter([("x".to_owned(), deep)]));
        let schema = Value::Object(serde_json::Map::from_iter([("properties".to_owned(), props)]));
        assert_eq!(params(&schema), [("x".to_owned(), String::new())]);
        // serde_json's Value drops deep nesting recursively; leak it rather than overflow the test's stack.
        std::mem::forget(schema);
    }

    #[test]
    fn accepts_any_value() {
        for v in [json!(true), json!(null), json!([1, 2]), json!({"properties": []}), json!({"$ref": 3})] {
            assert!(params(&v).is_empty());
        }
    }
}
