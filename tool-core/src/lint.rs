//! Provider checks: what each provider will silently drop or reject from a tool, found before a model ever sees it.
//!
//! [`lint`] looks at one [`ToolDefinition`] and [`lint_all`] at a set of them (adding the per-request limits);
//! both are pure and return [`Finding`]s, each with the provider, the tool, a [`Severity`] and a sentence:
//!
//! | provider | what is checked | severity |
//! |---|---|---|
//! | all | the argument schema is not a JSON object schema (every provider requires one) | error |
//! | all | the description is empty, or longer than [`MAX_DESCRIPTION`] characters | error / warning |
//! | Ollama | keywords Ollama ignores, found by comparing the canonical schema with the rendered `parameters`: folded into a description by keel (`pattern`, bounds, unions, maps) | info |
//! | Ollama | keywords dropped without a trace (`not`, `if`/`then`/`else`, `dependentRequired`, ...), recursive types cut to a stand-in | warning |
//! | OpenAI | the schema cannot be strict, so it is sent with `"strict": false` ([`ToolDefinition::openai_strictness`]) | warning |
//! | OpenAI | keywords strict mode does not take, which keel folds into the description (`minLength`, `maxLength`, formats outside its list, ...) | info |
//! | OpenAI, Anthropic, Gemini | a dotted name, sent as its wire name (`incident.search` as `incident-search`) and mapped back with [`ToolView::get_by_wire_name`](crate::ToolView::get_by_wire_name) | info |
//! | Gemini | a wire name outside `[A-Za-z_][A-Za-z0-9_.:-]{0,63}` | error |
//! | Gemini | keywords outside the JSON Schema subset Gemini documents for `parametersJsonSchema` | warning (validation) / info (annotations) |
//! | Gemini | enum values that are neither strings nor numbers | warning |
//! | MCP | a result that is not a JSON object: no `outputSchema`, the result travels as text only | info |
//! | each | every [`Loss`] its [`Codec`](crate::Codec) reports ([`Codec::losses`](crate::Codec::losses)): adapted is info, dropped a warning, rejected an error; e.g. what the ollama Python client drops (a property's nested `properties`, a reply's `tool_call_id`) | as the loss |
//! | OpenAI, Gemini | more than [`MAX_TOOLS_PER_REQUEST`] tools in one set (per request) | warning |
//!
//! An error means the provider rejects the tool; a warning means it accepts the tool but silently loses something
//! the model should know (the executor still enforces it: arguments are validated against the canonical schema
//! whatever the provider showed the model); info is a lossless adaptation keel already made.
//!
//! The provider facts used here, as documented by each provider:
//! - Ollama reads tool parameters into a fixed structure (type, description, enum, properties, required, items)
//!   and drops everything else (see the `ollama` renderer).
//! - OpenAI function names are `[a-zA-Z0-9_-]{1,64}`; a request takes at most 128 tools; strict mode accepts only
//!   a subset of JSON Schema (see the `openai` renderer).
//! - Anthropic tool names are `[a-zA-Z0-9_-]{1,64}`.
//! - Gemini function declaration names start with a letter or an underscore, contain letters, digits,
//!   underscores, dots, colons and dashes, and are at most 64 characters; a request takes at most 128 function
//!   declarations. Gemini's JSON Schema support covers: `type` (string, number, integer, boolean, object, array,
//!   null), `title`, `description`; for objects `properties`, `required`, `additionalProperties`; for strings
//!   `enum` and `format` (`date-time`, `date`, `time`); for numbers `enum`, `minimum`, `maximum`; for arrays
//!   `items`, `prefixItems`, `minItems`, `maxItems`; and `anyOf`, `$ref`, `$defs`. Other keywords are ignored.
//! - MCP `outputSchema` must describe an object (structured results are JSON objects).

use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};

use super::Provider;
use crate::codec::{self, Loss, LossKind};
use crate::definition::ToolDefinition;
use crate::schema::transform::{self, NUMERIC_FORMATS, OnRecursion};

/// Descriptions longer than this many characters get a warning: they are sent with every request.
pub const MAX_DESCRIPTION: usize = 1024;

/// The most tools OpenAI and Gemini take in one request.
pub const MAX_TOOLS_PER_REQUEST: usize = 128;

/// The deepest nesting the walkers descend into.
use crate::vocabulary::{self, MAX_DEPTH};

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// A lossless adaptation keel already made.
    Info,
    /// The provider accepts the tool but silently loses something the model should know.
    Warning,
    /// The provider rejects the tool.
    Error,
}

impl Severity {
    /// `info`, `warning` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing a provider will drop or reject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The provider; `None` for every provider.
    #[serde(serialize_with = "provider_label")]
    pub provider: Option<Provider>,
    /// The tool name; `*` for a finding about the whole set.
    pub tool: String,
    /// How serious it is.
    pub severity: Severity,
    /// What happens, in a sentence.
    pub message: String,
}

fn provider_label<S: serde::Serializer>(p: &Option<Provider>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(p.map_or("all", Provider::as_str))
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let provider = self.provider.map_or("all", Provider::as_str);
        write!(f, "{}: [{provider}] {}: {}", self.severity, self.tool, self.message)
    }
}

fn finding(provider: Option<Provider>, tool: &str, severity: Severity, message: String) -> Finding {
    Finding { provider, tool: tool.to_owned(), severity, message }
}

/// Every finding for one tool, in provider order.
pub fn lint(def: &ToolDefinition) -> Vec<Finding> {
    let mut out = Vec::new();
    general(def, &mut out);
    if is_object_schema(def.input_schema()) {
        ollama(def, &mut out);
        openai(def, &mut out);
        anthropic(def, &mut out);
        gemini(def, &mut out);
    }
    mcp(def, &mut out);
    for provider in Provider::ALL {
        out.extend(codec::entry_losses(provider, def).into_iter().map(from_loss));
    }
    out
}

/// A codec's loss as a finding: adapted is info, dropped a warning, rejected an error.
fn from_loss(loss: Loss) -> Finding {
    let severity = match loss.kind {
        LossKind::Adapted => Severity::Info,
        LossKind::Dropped => Severity::Warning,
        LossKind::Rejected => Severity::Error,
    };
    finding(Some(loss.provider), &loss.tool, severity, loss.message)
}

/// Every finding for a set of tools (typically a registry or a view), plus the findings about the set itself.
pub fn lint_all<'a>(defs: impl IntoIterator<Item = &'a ToolDefinition>) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut count = 0;
    for def in defs {
        count += 1;
        out.extend(lint(def));
    }
    if count > 0 {
        for provider in Provider::ALL {
            out.extend(codec::format_losses(provider).into_iter().map(from_loss));
        }
    }
    if count > MAX_TOOLS_PER_REQUEST {
        for p in [Provider::OpenAiChat, Provider::Gemini] {
            out.push(finding(
                Some(p),
                "*",
                Severity::Warning,
                format!(
                    "{count} tools: a request takes at most {MAX_TOOLS_PER_REQUEST}; send a view (by tag or names) \
                     rather than the whole registry"
                ),
            ));
        }
    }
    out
}

fn is_object_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

fn general(def: &ToolDefinition, out: &mut Vec<Finding>) {
    let name = def.name();
    if !is_object_schema(def.input_schema()) {
        out.push(finding(
            None,
            name,
            Severity::Error,
            "the argument schema is not an object schema (\"type\": \"object\"); every provider requires one".into(),
        ));
    }
    let len = def.description().chars().count();
    if def.description().trim().is_empty() {
        out.push(finding(
            None,
            name,
            Severity::Error,
            "the description is empty; the model cannot tell when to call the tool".into(),
        ));
    } else if len > MAX_DESCRIPTION {
        out.push(finding(
            None,
            name,
            Severity::Warning,
            format!(
                "the description is {len} characters (over {MAX_DESCRIPTION}); it is sent with every request, \
                 so keep it to what the model needs to choose and call the tool"
            ),
        ));
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Schema walking
// ---------------------------------------------------------------------------------------------------------------

fn child_path(parent: &str, segment: &str) -> String {
    match (parent.is_empty(), segment.starts_with('[')) {
        (true, true) => format!("(top level){segment}"),
        (true, false) => segment.to_owned(),
        (false, true) => format!("{parent}{segment}"),
        (false, false) => format!("{parent}.{segment}"),
    }
}

fn show_path(path: &str) -> String {
    if path.is_empty() { "the top level".to_owned() } else { format!("`{path}`") }
}

/// Calls `f(path, schema)` for every subschema object: properties (`a.b`), items (`a[]`), map values (`a.*`),
/// union and conjunction branches (same path), definitions (`$defs.Name`).
fn walk(schema: &Value, path: &str, depth: usize, f: &mut dyn FnMut(&str, &Map<String, Value>)) {
    let Value::Object(map) = schema else { return };
    if depth > MAX_DEPTH {
        return;
    }
    f(path, map);
    vocabulary::for_each_child(schema, |keyword, name, child| {
        let at = match (keyword, name) {
            ("properties", Some(name)) => child_path(path, name),
            ("items" | "prefixItems", _) => child_path(path, "[]"),
            ("additionalProperties", _) => child_path(path, "*"),
            ("anyOf" | "oneOf" | "allOf", _) => path.to_owned(),
            ("$defs" | "definitions", Some(name)) => format!("$defs.{name}"),
            // The other applicators say nothing a provider drops that these paths do not already show.
            _ => return,
        };
        walk(child, &at, depth + 1, f);
    });
}

fn join_keywords(keywords: &[&str]) -> String {
    keywords.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
}

// ---------------------------------------------------------------------------------------------------------------
// Ollama
// ---------------------------------------------------------------------------------------------------------------

/// Keywords that are not worth a finding when Ollama drops them: metadata, the closing of objects (the executor
/// enforces it), and structure keel rewrites into what Ollama keeps.
const OLLAMA_IGNORED: &[&str] = &[
    "$schema",
    "$id",
    "$anchor",
    "$comment",
    "$defs",
    "definitions",
    "title",
    "description",
    "readOnly",
    "writeOnly",
    "type",
    "properties",
    "required",
    "items",
    "enum",
    "const",
    "allOf",
    "unevaluatedProperties",
];

/// Keywords Ollama drops that keel cannot state in a description.
const OLLAMA_SILENT: &[&str] = &[
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "contains",
    "minContains",
    "maxContains",
    "unevaluatedItems",
    "contentSchema",
    "$dynamicRef",
    "$dynamicAnchor",
];

fn ollama(def: &ToolDefinition, out: &mut Vec<Finding>) {
    let inlined = transform::inline_refs(def.input_schema(), OnRecursion::Stub);
    for cut in &inlined.cuts {
        out.push(finding(
            Some(Provider::Ollama),
            def.name(),
            Severity::Warning,
            format!(
                "{}; Ollama cannot follow references, so the model sees a described stand-in object there",
                cut.describe()
            ),
        ));
    }
    // The parameters before the top level's description moves into the function's: what the model reads for the
    // top level is there, and the comparison needs it next to the schema it describes.
    let rendered = crate::schema::ollama_parameters(def.input_schema());
    compare_ollama(def.name(), &inlined.schema, &rendered, "", 0, out);
}

/// Whether a union is only `T | null` (an `Option`): Ollama's plain `T` loses nothing, as the field is optional.
fn is_option_union(branches: &[Value]) -> bool {
    branches.iter().filter(|b| !transform::is_null_only(b)).count() <= 1
}

fn compare_ollama(tool: &str, canonical: &Value, rendered: &Value, path: &str, depth: usize, out: &mut Vec<Finding>) {
    let (Value::Object(c), Value::Object(r)) = (canonical, rendered) else { return };
    if depth > MAX_DEPTH {
        return;
    }
    let mut folded = Vec::new();
    let mut silent = Vec::new();
    for (k, v) in c {
        if r.contains_key(k) || OLLAMA_IGNORED.contains(&k.as_str()) {
            continue;
        }
        match (k.as_str(), v) {
            ("additionalProperties", Value::Bool(_)) => continue,
            ("format", Value::String(f)) if NUMERIC_FORMATS.contains(&f.as_str()) => continue,
            ("anyOf" | "oneOf", Value::Array(branches)) if is_option_union(branches) => continue,
            ("uniqueItems" | "deprecated", Value::Bool(false)) => continue,
            _ => {}
        }
        if OLLAMA_SILENT.contains(&k.as_str()) {
            silent.push(k.as_str());
        } else {
            folded.push(k.as_str());
        }
    }
    folded.sort_unstable();
    silent.sort_unstable();
    let (notes, folded): (Vec<&str>, Vec<&str>) = folded.into_iter().partition(|k| vocabulary::asserts_nothing(k));
    let described = |m: &Map<String, Value>| m.get("description").and_then(Value::as_str).unwrap_or("").to_owned();
    let in_words = described(r) != described(c);
    if !folded.is_empty() {
        let them = if folded.len() == 1 { "it" } else { "them" };
        let (severity, how) = if in_words {
            (Severity::Info, format!("keel states {them} in the description; the executor still enforces {them}"))
        } else {
            (Severity::Warning, format!("the model does not see {them}; the executor still enforces {them}"))
        };
        out.push(finding(
            Some(Provider::Ollama),
            tool,
            severity,
            format!("{}: Ollama ignores {}; {how}", show_path(path), join_keywords(&folded)),
        ));
    }
    if !notes.is_empty() {
        let how = if in_words { "keel states it in the description" } else { "the model does not see it" };
        out.push(finding(
            Some(Provider::Ollama),
            tool,
            Severity::Info,
            format!("{}: Ollama ignores the annotation(s) {}; {how}", show_path(path), join_keywords(&notes)),
        ));
    }
    if !silent.is_empty() {
        out.push(finding(
            Some(Provider::Ollama),
            tool,
            Severity::Warning,
            format!(
                "{}: Ollama drops {} and keel cannot say it in words; the model does not see this rule, the \
                 executor still enforces it",
                show_path(path),
                join_keywords(&silent)
            ),
        ));
    }
    if let (Some(Value::Object(cp)), Some(Value::Object(rp))) = (c.get("properties"), r.get("properties")) {
        for (k, v) in cp {
            if let Some(rv) = rp.get(k) {
                compare_ollama(tool, v, rv, &child_path(path, k), depth + 1, out);
            }
        }
    }
    if let (Some(ci @ Value::Object(_)), Some(ri)) = (c.get("items"), r.get("items")) {
        compare_ollama(tool, ci, ri, &child_path(path, "[]"), depth + 1, out);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// OpenAI
// ---------------------------------------------------------------------------------------------------------------

/// Keywords strict mode does not take and keel folds into the description.
const OPENAI_FOLDED: &[&str] = &["minLength", "maxLength", "uniqueItems", "minProperties", "maxProperties"];

fn openai(def: &ToolDefinition, out: &mut Vec<Finding>) {
    let name = def.name();
    let p = Some(Provider::OpenAiChat);
    match def.openai_strictness() {
        Err(reason) => out.push(finding(
            p,
            name,
            Severity::Warning,
            format!(
                "cannot be strict, so it is sent with \"strict\": false (Chat Completions and Responses): {reason}; \
                 the model may send arguments that do not match, which the executor answers with invalid_arguments"
            ),
        )),
        Ok(()) => {
            let inlined = transform::inline_refs(def.input_schema(), OnRecursion::Stub).schema;
            walk(&inlined, "", 0, &mut |path, map| {
                let mut folded: Vec<&str> = OPENAI_FOLDED
                    .iter()
                    .copied()
                    .filter(|k| map.get(*k).is_some_and(|v| v != &Value::Bool(false)))
                    .collect();
                if let Some(Value::String(f)) = map.get("format")
                    && !crate::schema::STRICT_FORMATS.contains(&f.as_str())
                    && !NUMERIC_FORMATS.contains(&f.as_str())
                {
                    folded.push("format");
                }
                folded.sort_unstable();
                if !folded.is_empty() {
                    out.push(finding(
                        p,
                        name,
                        Severity::Info,
                        format!(
                            "{}: strict mode does not take {}; keel states them in the description and the executor \
                             enforces them",
                            show_path(path),
                            join_keywords(&folded)
                        ),
                    ));
                }
            });
        }
    }
    wire_name(def, Provider::OpenAiChat, "OpenAI", out);
}

fn wire_name(def: &ToolDefinition, provider: Provider, label: &str, out: &mut Vec<Finding>) {
    if def.name() != def.wire_name() {
        out.push(finding(
            Some(provider),
            def.name(),
            Severity::Info,
            format!(
                "{label} is sent the wire name `{}` (dots are not allowed there); keel maps it back with \
                 ToolView::get_by_wire_name",
                def.wire_name()
            ),
        ));
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Anthropic
// ---------------------------------------------------------------------------------------------------------------

fn anthropic(def: &ToolDefinition, out: &mut Vec<Finding>) {
    wire_name(def, Provider::Anthropic, "Anthropic", out);
}

// ---------------------------------------------------------------------------------------------------------------
// Gemini
// ---------------------------------------------------------------------------------------------------------------

/// The keywords of Gemini's documented JSON Schema subset.
const GEMINI_SUPPORTED: &[&str] = &[
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
    "propertyOrdering",
];

/// The string formats Gemini documents.
const GEMINI_FORMATS: &[&str] = &["date-time", "date", "time"];

fn gemini_name_ok(wire: &str) -> bool {
    let mut chars = wire.chars();
    wire.len() <= 64
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}

fn gemini(def: &ToolDefinition, out: &mut Vec<Finding>) {
    let name = def.name();
    let p = Some(Provider::Gemini);
    if !gemini_name_ok(def.wire_name()) {
        out.push(finding(
            p,
            name,
            Severity::Error,
            format!(
                "Gemini rejects the name `{}`: a function name starts with a letter or `_`, has only letters, \
                 digits, `_`, `.`, `:` and `-`, and is at most 64 characters",
                def.wire_name()
            ),
        ));
    }
    wire_name(def, Provider::Gemini, "Gemini", out);
    let Some(schema) = def.render(Provider::Gemini).get("parametersJsonSchema") else { return };
    walk(schema, "", 0, &mut |path, map| {
        let mut validation = Vec::new();
        let mut annotations = Vec::new();
        for (k, v) in map {
            let k = k.as_str();
            if GEMINI_SUPPORTED.contains(&k) || k == "definitions" {
                if k == "format"
                    && let Value::String(f) = v
                    && !GEMINI_FORMATS.contains(&f.as_str())
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
            out.push(finding(
                p,
                name,
                Severity::Warning,
                format!(
                    "{}: {} {} outside Gemini's documented JSON Schema subset and is ignored; the model does not \
                     see it, the executor still enforces it",
                    show_path(path),
                    join_keywords(&validation),
                    if validation.len() == 1 { "is" } else { "are" }
                ),
            ));
        }
        if !annotations.is_empty() {
            out.push(finding(
                p,
                name,
                Severity::Info,
                format!("{}: Gemini ignores the annotation(s) {}", show_path(path), join_keywords(&annotations)),
            ));
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            let odd: Vec<String> =
                values.iter().filter(|v| !(v.is_string() || v.is_number())).map(|v| v.to_string()).collect();
            if !odd.is_empty() {
                out.push(finding(
                    p,
                    name,
                    Severity::Warning,
                    format!(
                        "{}: Gemini documents enum values as strings or numbers; {} may be dropped",
                        show_path(path),
                        odd.join(", ")
                    ),
                ));
            }
        }
    });
}

// ---------------------------------------------------------------------------------------------------------------
// MCP
// ---------------------------------------------------------------------------------------------------------------

fn mcp(def: &ToolDefinition, out: &mut Vec<Finding>) {
    if let Some(output) = def.output_schema()
        && !is_object_schema(output)
        && def.render(Provider::Mcp).get("outputSchema").is_none()
    {
        out.push(finding(
            Some(Provider::Mcp),
            def.name(),
            Severity::Info,
            "the result is not a JSON object, so the tool has no outputSchema; MCP clients get the result as text \
             content only"
                .into(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::error::ToolError;

    fn def(name: &str, input: Value, output: Option<Value>) -> ToolDefinition {
        let mut b = ToolDefinition::builder(name.to_owned())
            .description("Does a thing.")
            .input_schema(input)
            .handler(|_a, _c| async { Ok::<_, ToolError>(Value::Null) });
        if let Some(o) = output {
            b = b.output_schema(o);
        }
        b.build().unwrap()
    }

    fn messages(findings: &[Finding], provider: Provider, severity: Severity) -> Vec<String> {
        findings
            .iter()
            .filter(|f| f.provider == Some(provider) && f.severity == severity)
            .map(|f| f.message.clone())
            .collect()
    }

    #[test]
    fn a_plain_tool_has_no_warnings() {
        let d = def(
            "lookup",
            json!({"type": "object", "properties": {"id": {"type": "string", "description": "The id."}},
                   "required": ["id"], "additionalProperties": false}),
            Some(json!({"type": "object", "properties": {"ok": {"type": "boolean"}}})),
        );
        let f = lint(&d);
        assert!(f.iter().all(|f| f.severity == Severity::Info), "{f:#?}");
        assert!(f.is_empty(), "{f:#?}");
    }

    #[test]
    fn ollama_folded_and_silent_keywords() {
        let d = def(
            "search",
            json!({"type": "object", "properties": {
                "id": {"type": "string", "pattern": "^INC-[0-9]+$"},
                "limit": {"type": "integer", "format": "uint32", "minimum": 1, "maximum": 50},
                "maybe": {"type": ["string", "null"]},
                "odd": {"type": "string", "not": {"const": "x"}},
                "shape": {"oneOf": [
                    {"type": "object", "properties": {"r": {"type": "number"}}, "required": ["r"]},
                    {"type": "object", "properties": {"side": {"type": "number"}}, "required": ["side"]}
                ]}
            }, "required": ["id"]}),
            None,
        );
        let f = lint(&d);
        let info = messages(&f, Provider::Ollama, Severity::Info);
        assert!(info.iter().any(|m| m.starts_with("`id`: Ollama ignores `pattern`")), "{info:#?}");
        assert!(info.iter().any(|m| m.starts_with("`limit`: Ollama ignores `maximum`, `minimum`")), "{info:#?}");
        assert!(info.iter().any(|m| m.starts_with("`shape`: Ollama ignores `oneOf`")), "{info:#?}");
        assert!(!info.iter().any(|m| m.contains("`maybe`")), "an Option loses nothing: {info:#?}");
        let warnings = messages(&f, Provider::Ollama, Severity::Warning);
        assert!(warnings.iter().any(|m| m.starts_with("`odd`: Ollama drops `not`")), "{warnings:#?}");
        // Gemini: pattern and not are outside its subset; oneOf too.
        let g = messages(&f, Provider::Gemini, Severity::Warning);
        assert!(g.iter().any(|m| m.starts_with("`id`: `pattern` is outside")), "{g:#?}");
        assert!(g.iter().any(|m| m.starts_with("`shape`: `oneOf` is outside")), "{g:#?}");
    }

    #[test]
    fn ollama_top_level_notes_are_said_in_words() {
        // A union at the top level is described in a note, which Ollama reads in the function's description.
        let d = def(
            "shape.put",
            json!({"type": "object", "properties": {"top": {"type": "string"}}, "oneOf": [
                {"properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}, "required": ["kind", "r"]},
                {"properties": {"kind": {"const": "square"}, "side": {"type": "number"}}, "required": ["kind", "side"]}
            ]}),
            None,
        );
        assert!(d.render(Provider::Ollama)["function"]["description"].as_str().is_some_and(|s| s.contains("One of:")));
        let f = lint(&d);
        let info = messages(&f, Provider::Ollama, Severity::Info);
        assert!(
            info.iter().any(|m| m.starts_with("the top level: Ollama ignores `oneOf`; keel states it")),
            "{info:#?}"
        );
        assert!(messages(&f, Provider::Ollama, Severity::Warning).is_empty(), "{f:#?}");
    }

    #[test]
    fn gemini_takes_documented_enums_as_plain_enums() {
        let d = def("incident.search", crate::schema::fixtures::schema::<crate::schema::fixtures::Everything>(), None);
        let f = lint(&d);
        let gemini: Vec<&Finding> = f.iter().filter(|f| f.provider == Some(Provider::Gemini)).collect();
        for field in ["`severity`", "`secondary`", "`color`"] {
            assert!(!gemini.iter().any(|f| f.message.starts_with(field)), "{field}: {gemini:#?}");
        }
        // A data enum is still a union of objects, outside the subset.
        assert!(gemini.iter().any(|f| f.message.starts_with("`shape`: `oneOf`")), "{gemini:#?}");
    }

    #[test]
    fn recursion_openai_strictness_wire_names_and_mcp() {
        let d = def(
            "tree.put",
            json!({"type": "object", "properties": {"root": {"$ref": "#/$defs/Node"},
                   "labels": {"type": "object", "additionalProperties": {"type": "string"}}},
                   "required": ["root"],
                   "$defs": {"Node": {"type": "object", "properties": {"children": {"type": "array",
                       "items": {"$ref": "#/$defs/Node"}}}, "required": ["children"]}}}),
            Some(json!({"type": "string"})),
        );
        let f = lint(&d);
        assert!(messages(&f, Provider::Ollama, Severity::Warning).iter().any(|m| m.contains("recursive")), "{f:#?}");
        let o = messages(&f, Provider::OpenAiChat, Severity::Warning);
        assert!(o.iter().any(|m| m.starts_with("cannot be strict")), "{o:#?}");
        for p in [Provider::OpenAiChat, Provider::Anthropic, Provider::Gemini] {
            assert!(messages(&f, p, Severity::Info).iter().any(|m| m.contains("`tree-put`")), "{p:?}: {f:#?}");
        }
        assert!(!messages(&f, Provider::Mcp, Severity::Info).is_empty());
        assert!(!f.iter().any(|f| f.severity == Severity::Error), "{f:#?}");
    }

    #[test]
    fn openai_strict_folds_and_long_descriptions() {
        let d = ToolDefinition::builder("note")
            .description("x".repeat(MAX_DESCRIPTION + 1))
            .input_schema(json!({"type": "object", "properties": {"text": {"type": "string", "maxLength": 10}},
                                 "required": ["text"], "additionalProperties": false}))
            .handler(|_a, _c| async { Ok::<_, ToolError>(Value::Null) })
            .build()
            .unwrap();
        let f = lint(&d);
        let info = messages(&f, Provider::OpenAiChat, Severity::Info);
        assert!(info.iter().any(|m| m.starts_with("`text`: strict mode does not take `maxLength`")), "{info:#?}");
        assert!(f.iter().any(|f| f.provider.is_none() && f.severity == Severity::Warning), "{f:#?}");
    }

    #[test]
    fn gemini_names_and_counts() {
        assert!(gemini_name_ok("incident-search"));
        assert!(gemini_name_ok("_x.y:z"));
        assert!(!gemini_name_ok("1abc"));
        assert!(!gemini_name_ok(&"a".repeat(65)));
        let defs: Vec<ToolDefinition> =
            (0..MAX_TOOLS_PER_REQUEST + 1).map(|i| def(&format!("t{i}"), json!({"type": "object"}), None)).collect();
        let f = lint_all(defs.iter());
        let counts = |f: &&Finding| f.tool == "*" && f.message.contains("a request takes at most");
        assert_eq!(f.iter().filter(counts).count(), 2, "{f:#?}");
        // The reply formats' losses, once for the set.
        assert_eq!(
            f.iter().filter(|f| f.tool == "*").count(),
            2 + Provider::ALL.iter().map(|&p| codec::format_losses(p).len()).sum::<usize>()
        );
    }

    #[test]
    fn serializes_with_provider_labels() {
        let f = finding(Some(Provider::OpenAiChat), "t", Severity::Warning, "m".into());
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            json!({"provider": "openai-chat", "tool": "t", "severity": "warning", "message": "m"})
        );
        assert_eq!(f.to_string(), "warning: [openai-chat] t: m");
    }
}
