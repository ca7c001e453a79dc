//! Provider checks: what each provider will silently drop or reject from a tool, found before a model ever sees it;
//! and description checks ([`description`]): text in a tool's description that speaks to the model instead of
//! describing the tool, the signs of tool poisoning.
//!
//! [`lint`] looks at one [`ToolDefinition`] and [`lint_all`] at a set of them (adding the per-request limits and
//! shadowing); both are pure and return [`Finding`]s, each with the provider, the tool, a [`Severity`] and a
//! sentence. Lint knows no provider's format: besides the checks that hold for every provider, its findings are the
//! [`Loss`]es each provider's [`Codec`](keel_tools_core::Codec) reports ([`Codec::losses`](keel_tools_core::Codec::losses)), projected
//! by kind: adapted and ignored are info, dropped a warning, rejected an error.
//!
//! | provider | what is checked | severity |
//! |---|---|---|
//! | all | the argument schema is not a JSON object schema (every provider requires one) | error |
//! | all | the description is empty, or longer than [`MAX_DESCRIPTION`] characters | error / warning |
//! | all | the name, the description or the argument schema's descriptions hold hidden characters or instructions to the model, or the description is far longer than the schema warrants ([`description::check_description`]) | warning |
//! | all | ([`lint_all`]) a tool imported from an MCP server (tagged `mcp:<namespace>`, named `<namespace>.<name>`) is named on its server like another tool ([`description::check_shadowing`]) | warning |
//! | OpenAI, Gemini | more than [`MAX_TOOLS_PER_REQUEST`] tools in one set (per request) | warning |
//! | Ollama | keywords Ollama ignores, found by comparing the canonical schema with the rendered `parameters`: stated in a description by keel (`pattern`, bounds, unions, maps) | info |
//! | Ollama | keywords dropped without a trace (`not`, `if`/`then`/`else`, `dependentRequired`, ...), recursive types cut to a stand-in; what the ollama Python client drops (a property's nested `properties`, a reply's `tool_call_id`) | warning |
//! | OpenAI (both APIs) | the schema cannot be strict, so it is sent with `"strict": false` ([`ToolDefinition::openai_strictness`]) | warning |
//! | OpenAI (both APIs) | keywords strict mode does not take, which keel states in the description (`minLength`, `maxLength`, formats outside its list, `default`, ...) | info |
//! | Anthropic | the schema cannot be sent with `"strict": true` (strict tool use, asked for with `Strict::WhenPossible` or `Strict::Required`; [`ToolDefinition::anthropic_strictness`]) | info |
//! | OpenAI, Anthropic, Gemini | a dotted name, sent as its wire name (`incident.search` as `incident-search`) and mapped back by the codec | info |
//! | Gemini | a wire name outside `[A-Za-z_][A-Za-z0-9_.:-]{0,63}` | error |
//! | Gemini | keywords outside the JSON Schema subset Gemini documents for `parametersJsonSchema` | warning (validation) / info (annotations) |
//! | Gemini | enum values that are neither strings nor numbers | warning |
//! | MCP | a result that is not a JSON object: no `outputSchema`, the result travels as text only | info |
//!
//! An error means the provider rejects the tool; a warning means it accepts the tool but silently loses something
//! the model should know (the executor still enforces it: arguments are validated against the canonical schema
//! whatever the provider showed the model); info is a lossless adaptation keel already made, or an annotation a
//! provider does not read. A description warning means the description may be poisoned: read it before the tool
//! is given to a model.

pub mod description;

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use keel_tools_core::Provider;
use keel_tools_core::codecs::{Loss, LossKind};
use keel_tools_core::definition::{Origin, ToolDefinition};

use description::NamedTool;

/// Descriptions longer than this many characters get a warning: they are sent with every request.
pub const MAX_DESCRIPTION: usize = 1024;

/// The most tools OpenAI and Gemini take in one request.
pub const MAX_TOOLS_PER_REQUEST: usize = 128;

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
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

/// One thing a provider will drop or reject, or one sign of a poisoned description.
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
    for f in description::check_description(def.name(), def.description(), def.input_schema()) {
        out.push(finding(None, def.name(), Severity::Warning, f.message));
    }
    for provider in Provider::ALL {
        out.extend(def.losses(provider).into_iter().map(from_loss));
        if provider == Provider::Anthropic {
            anthropic_strictness(def, &mut out);
        }
    }
    out
}

/// Anthropic's strict tool use is asked for, not sent by default: a tool that cannot take it is worth knowing
/// before it is asked for (info), not a loss of the default entry.
fn anthropic_strictness(def: &ToolDefinition, out: &mut Vec<Finding>) {
    if !is_object_schema(def.input_schema()) {
        return;
    }
    if let Err(why) = def.anthropic_strictness() {
        out.push(finding(
            Some(Provider::Anthropic),
            def.name(),
            Severity::Info,
            format!(
                "cannot be strict (strict tool use, asked for with Strict::WhenPossible or Strict::Required): {why}; \
                 it is sent without \"strict\", and Strict::Required refuses to send it"
            ),
        ));
    }
}

/// A codec's loss as a finding: adapted is info, dropped a warning, rejected an error.
fn from_loss(loss: Loss) -> Finding {
    let severity = match loss.kind {
        LossKind::Adapted | LossKind::Ignored => Severity::Info,
        LossKind::Dropped => Severity::Warning,
        LossKind::Rejected => Severity::Error,
        // A kind this version does not know: said, but not as an error.
        _ => Severity::Warning,
    };
    finding(Some(loss.provider), &loss.tool, severity, loss.message)
}

/// Every finding for a set of tools (typically a registry or a view), plus the findings about the set itself. Each
/// tool's findings are together, shadowing among them; the findings about the set (tool `*`) come last.
pub fn lint_all<'a>(defs: impl IntoIterator<Item = &'a ToolDefinition>) -> Vec<Finding> {
    let defs: Vec<&ToolDefinition> = defs.into_iter().collect();
    let count = defs.len();
    let names: Vec<NamedTool<'_>> = defs.iter().map(|d| named_tool(d)).collect();
    let mut shadowing = description::check_shadowing(&names);
    let mut out = Vec::new();
    for def in defs {
        out.extend(lint(def));
        for (_, f) in shadowing.extract_if(.., |(tool, _)| tool == def.name()) {
            out.push(finding(None, def.name(), Severity::Warning, f.message));
        }
    }
    if count > 0 {
        for provider in Provider::ALL {
            out.extend(provider.reply_losses().into_iter().map(from_loss));
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

/// A definition as shadowing sees it: imported from an MCP server when tagged `mcp:<namespace>` and named
/// `<namespace>.<name>`, its name on the server read from its source (`mcp:<namespace> tool "<name>"`, as keel's
/// import writes it), or else the part of its name after the namespace.
fn named_tool(def: &ToolDefinition) -> NamedTool<'_> {
    let name = def.name();
    let imported = def.tags().filter_map(|t| t.strip_prefix("mcp:")).find_map(|ns| {
        let rest = name.strip_prefix(ns)?.strip_prefix('.')?;
        Some((ns, rest))
    });
    let Some((ns, rest)) = imported else { return NamedTool::local(name) };
    let origin = match def.origin() {
        Origin::Dynamic { source } => source
            .strip_prefix("mcp:")
            .and_then(|s| s.strip_prefix(ns))
            .and_then(|s| s.strip_prefix(" tool \""))
            .and_then(|s| s.strip_suffix('"'))
            .filter(|s| !s.contains('\\')),
        _ => None,
    };
    NamedTool::imported(name, ns, origin.unwrap_or(rest))
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use keel_tools_core::ToolError;

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
    fn examples_are_info_wherever_they_are_folded_into_the_description() {
        let input = json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"],
                           "additionalProperties": false});
        let d = ToolDefinition::builder("lookup")
            .description("Does a thing.")
            .input_schema(input)
            .example(json!({"id": "INC-001"}))
            .handler(|_a, _c| async { Ok::<_, ToolError>(Value::Null) })
            .build()
            .unwrap();
        let f = lint(&d);
        for provider in Provider::ALL {
            let about: Vec<&Finding> =
                f.iter().filter(|x| x.provider == Some(provider) && x.message.contains("Example arguments")).collect();
            if provider == Provider::Anthropic {
                assert!(about.is_empty(), "Anthropic takes input_examples: {about:#?}");
            } else {
                assert_eq!(about.len(), 1, "{}: {f:#?}", provider.as_str());
                assert_eq!(about[0].severity, Severity::Info);
                assert!(about[0].message.contains("the tool's example is stated"), "{}", about[0].message);
            }
        }
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

    /// How urgent an incident is.
    #[derive(schemars::JsonSchema, serde::Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Urgency {
        /// Nobody is paged.
        Low,
        /// Everyone is paged.
        High,
    }

    #[derive(schemars::JsonSchema, serde::Deserialize)]
    enum Color {
        Red,
        Green,
    }

    #[derive(schemars::JsonSchema, serde::Deserialize)]
    #[serde(tag = "kind", rename_all = "lowercase")]
    #[allow(dead_code)] // Read through its schema only.
    enum Shape {
        /// A circle.
        Circle { radius: f64 },
        /// A square.
        Square { side: u32 },
    }

    /// Searches incidents.
    #[keel_tools_core::tool(effect = "read", version = "1.0")]
    fn incident_search(
        #[arg(description = "How bad it is.")] severity: Urgency,
        secondary: Option<Urgency>,
        color: Color,
        shape: Shape,
    ) -> bool {
        let _ = (severity, secondary, color, shape);
        true
    }

    #[test]
    fn gemini_takes_documented_enums_as_plain_enums() {
        let registry = keel_tools_core::Registry::from_inventory().unwrap();
        let d = registry.all().get("incident_search").unwrap();
        let f = lint(d);
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
        let a = messages(&f, Provider::Anthropic, Severity::Info);
        assert!(
            a.iter().any(|m| m.starts_with("cannot be strict (strict tool use") && m.contains("recursive")),
            "{a:#?}"
        );
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
        // A closed object is strict for Anthropic too: nothing said.
        let a = messages(&f, Provider::Anthropic, Severity::Info);
        assert!(!a.iter().any(|m| m.starts_with("cannot be strict")), "{a:#?}");
        assert!(f.iter().any(|f| f.provider.is_none() && f.severity == Severity::Warning), "{f:#?}");
    }

    #[test]
    fn request_counts_and_reply_losses() {
        let defs: Vec<ToolDefinition> =
            (0..MAX_TOOLS_PER_REQUEST + 1).map(|i| def(&format!("t{i}"), json!({"type": "object"}), None)).collect();
        let f = lint_all(defs.iter());
        let counts = |f: &&Finding| f.tool == "*" && f.message.contains("a request takes at most");
        assert_eq!(f.iter().filter(counts).count(), 2, "{f:#?}");
        // The reply formats' losses, once for the set.
        assert_eq!(
            f.iter().filter(|f| f.tool == "*").count(),
            2 + Provider::ALL.iter().map(|&p| p.reply_losses().len()).sum::<usize>()
        );
    }

    #[test]
    fn imported_tools_are_read_from_their_tag_and_source() {
        let build = |name: &str, tag: Option<&str>, source: &str| {
            let mut b = ToolDefinition::builder(name.to_owned())
                .description("Does a thing.")
                .source(source.to_owned())
                .handler(|_a, _c| async { Ok::<_, ToolError>(Value::Null) });
            if let Some(t) = tag {
                b = b.tag(t.to_owned());
            }
            b.build().unwrap()
        };
        let cases = [
            (build("srv.get_env", Some("mcp:srv"), r#"mcp:srv tool "get-env""#), Some(("srv", "get-env"))),
            // A name the source cannot give plainly: the part of the keel name after the namespace.
            (build("srv.quote", Some("mcp:srv"), r#"mcp:srv tool "say \"hi\"""#), Some(("srv", "quote"))),
            (build("srv.other", Some("mcp:srv"), "builder"), Some(("srv", "other"))),
            // Tagged for another namespace than its name's, or not tagged: a tool of this program.
            (build("srv.x", Some("mcp:elsewhere"), r#"mcp:elsewhere tool "x""#), None),
            (build("srv.y", None, "builder"), None),
        ];
        for (def, expected) in &cases {
            let named = named_tool(def);
            assert_eq!(named.server.zip(Some(named.origin)), *expected, "{}", def.name());
            assert_eq!(named.name, def.name());
        }
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
