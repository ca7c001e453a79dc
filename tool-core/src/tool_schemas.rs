//! Schemas: the canonical JSON Schema 2020-12 of each tool (each provider's rendering is its codec's, in `codec`).

use std::sync::OnceLock;

use serde_json::Value;

#[cfg(test)]
pub(crate) mod fixtures;

pub(crate) use keel_tools_schema::rustdoc::{plain as plain_text, plain_schema};
use keel_tools_schema::transform;

/// The providers keel speaks to. Each has a [`Codec`](crate::Codec): its tool list entries
/// ([`ToolDefinition::render`](crate::definition::ToolDefinition::render)), the calls its models send, its replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Provider {
    /// Ollama `/api/chat` `tools`.
    Ollama,
    /// OpenAI Chat Completions `tools`.
    OpenAiChat,
    /// OpenAI Responses `tools`.
    OpenAiResponses,
    /// Anthropic Messages `tools`.
    Anthropic,
    /// Gemini `functionDeclarations`.
    Gemini,
    /// MCP `tools/list` entries.
    Mcp,
}

impl Provider {
    /// Every provider, in declaration order.
    pub const ALL: [Provider; 6] = [
        Provider::Ollama,
        Provider::OpenAiChat,
        Provider::OpenAiResponses,
        Provider::Anthropic,
        Provider::Gemini,
        Provider::Mcp,
    ];

    /// A stable lowercase label: `ollama`, `openai-chat`, `openai-responses`, `anthropic`, `gemini`, `mcp`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Provider::Ollama => "ollama",
            Provider::OpenAiChat => "openai-chat",
            Provider::OpenAiResponses => "openai-responses",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
            Provider::Mcp => "mcp",
        }
    }

    /// The provider's index in [`Provider::ALL`] (the cache slot).
    pub(crate) const fn slot(self) -> usize {
        match self {
            Provider::Ollama => 0,
            Provider::OpenAiChat => 1,
            Provider::OpenAiResponses => 2,
            Provider::Anthropic => 3,
            Provider::Gemini => 4,
            Provider::Mcp => 5,
        }
    }
}

/// Whether a codec sends its tools in the provider's strict mode, where the provider has one: OpenAI's
/// (`"strict": true` on a function, both APIs) and Anthropic's strict tool use (`"strict": true` on a tool). In
/// strict mode the provider constrains the model's arguments to the schema by grammar, and takes only a subset of
/// JSON Schema; keel converts each tool's schema into that subset, or says why it cannot
/// ([`ToolDefinition::strictness`](crate::definition::ToolDefinition::strictness)). Gemini, Ollama and MCP have no strict flag: the setting changes nothing there.
///
/// | | OpenAI (Chat, Responses) | Anthropic |
/// |---|---|---|
/// | [`Strict::Auto`] (the default) | strict for every tool that can be | not strict |
/// | [`Strict::Off`] | never strict: `"strict": false`, the schema as the canonical one (inlined) | not strict |
/// | [`Strict::WhenPossible`] | as `Auto` | strict for every tool that can be; the others are sent without, each reported ([`Codec::losses`](crate::Codec::losses)) |
/// | [`Strict::Required`] | every tool strict: a tool that cannot be is an error naming it and why ([`Codec::not_strict`](crate::Codec::not_strict)) | the same |
///
/// Anthropic's default is off because strict tool use is something a request opts into: only some models take
/// it, and every strict schema of a request is compiled into one grammar, which can grow past what the API
/// accepts for many or large tools.
///
/// Whatever the setting, the executor validates arguments against the canonical schema, after bringing them to
/// their canonical form: a `null` a strict-mode model sends for an optional property it leaves out (OpenAI's
/// strict mode makes every property required, optional ones nullable) counts as absent.
///
/// ```
/// use keel_tools_core::{tool, Provider, Registry, Strict};
///
/// /// Reads a note.
/// #[tool(name = "notes.read", effect = "read", version = "1.0")]
/// fn notes_read(id: String, verbose: Option<bool>) -> String {
///     format!("{id} {verbose:?}")
/// }
///
/// let view = Registry::from_inventory().unwrap().view().names(["notes.read"]).build().unwrap();
/// // Anthropic: strict only when asked for.
/// assert!(view.codec(Provider::Anthropic).tools()[0].get("strict").is_none());
/// let strict = view.codec(Provider::Anthropic).with_strict(Strict::Required);
/// assert!(strict.not_strict().is_empty());
/// assert_eq!(strict.tools()[0]["strict"], true);
/// // OpenAI: strict by default, off when asked.
/// assert_eq!(view.codec(Provider::OpenAiChat).tools()[0]["function"]["strict"], true);
/// let off = view.codec(Provider::OpenAiChat).with_strict(Strict::Off);
/// assert_eq!(off.tools()[0]["function"]["strict"], false);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Strict {
    /// keel's default for each provider: strict whenever the schema allows for OpenAI, not strict for Anthropic.
    #[default]
    Auto,
    /// Never strict.
    Off,
    /// Strict for every tool whose schema allows it, on every provider with a strict mode; a tool that cannot be
    /// is sent without, and reported as a loss.
    WhenPossible,
    /// Every tool strict: a tool that cannot be is an error ([`Codec::not_strict`](crate::Codec::not_strict) names each, and why). The
    /// clients refuse to send such a turn.
    Required,
}

impl Strict {
    /// `auto`, `off`, `when_possible` or `required`.
    pub fn as_str(self) -> &'static str {
        match self {
            Strict::Auto => "auto",
            Strict::Off => "off",
            Strict::WhenPossible => "when_possible",
            Strict::Required => "required",
        }
    }

    /// Whether `provider`'s entries are asked to be strict (when the schema allows) under this setting.
    pub(crate) fn wanted(self, provider: Provider) -> bool {
        match provider {
            Provider::OpenAiChat | Provider::OpenAiResponses => self != Strict::Off,
            Provider::Anthropic => matches!(self, Strict::WhenPossible | Strict::Required),
            _ => false,
        }
    }
}

/// How many renderings a tool caches: one per provider, and the variants a [`Strict`] setting asks for (OpenAI's
/// two APIs without strict mode, Anthropic's with it).
pub(crate) const RENDERINGS: usize = Provider::ALL.len() + 3;

/// The cache slot of `provider`'s rendering under `strict`: the provider's own, unless the setting asks for a form
/// other than the default one.
pub(crate) fn rendering_slot(provider: Provider, strict: Strict) -> usize {
    let base = Provider::ALL.len();
    match (provider, strict) {
        (Provider::OpenAiChat, Strict::Off) => base,
        (Provider::OpenAiResponses, Strict::Off) => base + 1,
        (Provider::Anthropic, Strict::WhenPossible | Strict::Required) => base + 2,
        _ => provider.slot(),
    }
}

/// A tool's schemas, produced once per definition and cached: the canonical input and output schemas, and each
/// provider's rendering once it has been asked for.
///
/// # The canonical schema
///
/// A compiled tool's argument and result schemas are generated by schemars (JSON Schema 2020-12, with `$schema`,
/// `$defs` and `$ref`, descriptions from doc comments, properties in declaration order), minus what only Rust
/// knows: the root `title` schemars makes up from a type's name (`SearchArgs`, `Map_of_uint64`) is left out (a
/// title the user wrote, with `#[schemars(title = "...")]` or a `# Heading` doc comment, stays), and rustdoc's
/// intra-doc links in descriptions and titles are plain text (``Arguments of [`search`].`` reads ``Arguments of
/// `search`.``; links to URLs stay). A compiled tool's description, its fn's doc comment, is made plain the same
/// way. [`ToolSchemas`] holds the schemas in canonical form: the input schema is what the executor validates a
/// model's arguments against, and the form every rendering starts from.
///
/// Canonicalisation changes one thing: **every object schema is closed**. An object that lists `properties` and
/// says nothing about other properties gets `"additionalProperties": false`, so a property the model invents is
/// rejected (`invalid_arguments`) rather than silently ignored. A struct with a `#[serde(flatten)]`ed enum (its own
/// fields in `properties`, each variant's in a `oneOf` branch) gets `"unevaluatedProperties": false` instead,
/// which sees the branches' properties; schemas that only describe part of an object (`allOf` branches) stay open,
/// and maps (`additionalProperties` already present) are left alone. `$defs`/`$ref` are kept. An input schema that
/// is not an object schema is left untouched (the registry reports it). The output schema is kept as generated.
#[derive(Debug)]
pub struct ToolSchemas {
    /// The canonical input schema (closed objects; see the module docs).
    pub(crate) input: Value,
    /// The output schema, as generated.
    pub(crate) output: Option<Value>,
    /// Each provider's rendering, by [`Provider::slot`], then the variants a [`Strict`](crate::Strict) setting
    /// asks for.
    pub(crate) rendered: [OnceLock<Value>; RENDERINGS],
    /// The same renderings as compact JSON text.
    pub(crate) rendered_json: [OnceLock<Box<str>>; RENDERINGS],
    /// Whether the input schema states a `default` anywhere (see [`ToolSchemas::states_defaults`]).
    defaults: OnceLock<bool>,
}

impl ToolSchemas {
    /// The canonical input schema with the ranges of fixed-width integer formats spelled out as bounds and
    /// documented enums folded into `enum`s: what the executor compiles for validation (the renderers keep the
    /// format and the per-value descriptions, which say the same to a model).
    pub(crate) fn input_for_validation(&self) -> Value {
        let mut v = self.input.clone();
        transform::bound_integers(&mut v);
        transform::fold_const_one_of(&mut v);
        v
    }

    /// The result schema with documented enums folded into `enum`s: what the executor compiles for validation.
    pub(crate) fn output_for_validation(&self) -> Option<Value> {
        let mut v = self.output.clone()?;
        transform::fold_const_one_of(&mut v);
        Some(v)
    }

    /// Canonicalises `input` (closes every object schema, when `input` is an object schema) and keeps `output` as
    /// it is.
    pub(crate) fn new(mut input: Value, output: Option<Value>) -> ToolSchemas {
        if input.get("type").and_then(Value::as_str) == Some("object") {
            transform::close_objects(&mut input);
        }
        ToolSchemas {
            input,
            output,
            rendered: Default::default(),
            rendered_json: Default::default(),
            defaults: OnceLock::new(),
        }
    }

    /// The canonical JSON Schema (2020-12) of the arguments: what the executor validates against.
    pub fn input(&self) -> &Value {
        &self.input
    }

    /// The JSON Schema of the result, if the tool declares one.
    pub fn output(&self) -> Option<&Value> {
        self.output.as_ref()
    }

    /// Whether the input schema states a `default` anywhere, computed once: when it does not, arguments without a
    /// `null` are already in canonical form.
    pub(crate) fn states_defaults(&self) -> bool {
        fn walk(schema: &Value, depth: usize) -> bool {
            if depth > keel_tools_schema::vocabulary::MAX_DEPTH {
                return true;
            }
            if schema.get("default").is_some() {
                return true;
            }
            let mut found = false;
            keel_tools_schema::vocabulary::for_each_child(schema, |_, _, child| {
                found = found || walk(child, depth + 1)
            });
            found
        }
        *self.defaults.get_or_init(|| walk(&self.input, 0))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tool_schemas::fixtures::{self, Address, Everything};

    #[test]
    fn canonical_input_closes_objects_and_keeps_definitions() {
        let generated = fixtures::schema::<Address>();
        assert!(generated.get("additionalProperties").is_none());
        let schemas = ToolSchemas::new(generated.clone(), Some(generated.clone()));
        assert_eq!(schemas.input()["additionalProperties"], false);
        assert_eq!(schemas.input()["$schema"], generated["$schema"]);
        // The output schema is kept as generated.
        assert_eq!(schemas.output(), Some(&generated));

        let everything = ToolSchemas::new(fixtures::schema::<Everything>(), None);
        let input = everything.input();
        assert!(input["$defs"]["Address"].is_object());
        assert_eq!(input["$defs"]["Address"]["additionalProperties"], false);
        assert_eq!(input["properties"]["homeAddress"]["$ref"], "#/$defs/Address");
        // Maps stay maps; enum variants are closed.
        assert_eq!(input["properties"]["labels"]["additionalProperties"], json!({"type": "string"}));
        assert_eq!(input["$defs"]["Shape"]["oneOf"][0]["additionalProperties"], false);
        fixtures::walk_schemas(input, &mut |s| {
            if s.get("properties").is_some() {
                assert!(s.get("additionalProperties").is_some() || s.get("unevaluatedProperties").is_some(), "{s}");
            }
        });
    }

    #[test]
    fn canonical_input_rejects_unknown_properties_but_accepts_valid_arguments() {
        let schemas = ToolSchemas::new(fixtures::schema::<fixtures::Flattened>(), None);
        let input = schemas.input();
        assert_eq!(input["unevaluatedProperties"], false);
        let validator = match jsonschema::validator_for(input) {
            Ok(v) => v,
            Err(e) => panic!("canonical schema does not compile: {e}"),
        };
        assert!(validator.is_valid(&json!({"top": "x", "kind": "circle", "radius": 1.0})));
        assert!(!validator.is_valid(&json!({"top": "x", "kind": "circle", "radius": 1.0, "extra": 1})));
        assert!(!validator.is_valid(&json!({"top": "x", "kind": "circle", "side": 1})));

        let schemas = ToolSchemas::new(fixtures::schema::<Everything>(), None);
        let validator = match jsonschema::validator_for(schemas.input()) {
            Ok(v) => v,
            Err(e) => panic!("canonical schema does not compile: {e}"),
        };
        let valid = fixtures::everything_arguments();
        assert!(
            validator.is_valid(&valid),
            "{:?}",
            validator.iter_errors(&valid).map(|e| e.to_string()).collect::<Vec<_>>()
        );
        let mut invalid = valid.clone();
        invalid["homeAddress"]["extra"] = json!(1);
        assert!(!validator.is_valid(&invalid));
    }

    #[test]
    fn non_object_input_is_left_alone() {
        let s = json!({"type": "string", "properties": {"a": {"type": "object", "properties": {}}}});
        assert_eq!(ToolSchemas::new(s.clone(), None).input(), &s);
        let weird = json!([1, 2, 3]);
        let schemas = ToolSchemas::new(weird.clone(), Some(json!(null)));
        assert_eq!(schemas.input(), &weird);
    }

    #[test]
    fn renders_once_and_caches() {
        let def = fixtures::definition("incident.search", fixtures::schema::<Everything>());
        for provider in Provider::ALL {
            let first: *const Value = def.render(provider);
            let second: *const Value = def.render(provider);
            assert_eq!(first, second, "{}", provider.as_str());
        }
        // A renamed copy renders its own name.
        let renamed = match def.renamed("incident.find") {
            Ok(d) => d,
            Err(e) => panic!("rename: {e}"),
        };
        assert_eq!(renamed.render(Provider::OpenAiChat)["function"]["name"], "incident-find");
        assert_eq!(renamed.render(Provider::Mcp)["name"], "incident.find");
    }

    #[test]
    fn every_provider_keeps_the_declaration_order() {
        let def = fixtures::definition("order.check", fixtures::schema::<fixtures::Ordered>());
        let keys = |v: &Value| v.as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
        let top = ["zulu", "alpha", "mike", "bravo"];
        let inner = ["yankee", "echo"];
        assert_eq!(keys(&def.input_schema()["properties"]), top);
        assert_eq!(def.input_schema()["required"], json!(["zulu", "mike", "bravo"]));
        let at = [
            (Provider::Ollama, "/function/parameters"),
            (Provider::OpenAiChat, "/function/parameters"),
            (Provider::OpenAiResponses, "/parameters"),
            (Provider::Anthropic, "/input_schema"),
            (Provider::Gemini, "/parametersJsonSchema"),
            (Provider::Mcp, "/inputSchema"),
        ];
        for (provider, pointer) in at {
            let label = provider.as_str();
            let s = def.render(provider).pointer(pointer).cloned().unwrap_or_default();
            assert_eq!(keys(&s["properties"]), top, "{label}: {s}");
            let nested = match provider {
                Provider::Mcp => s["$defs"]["Inner"].clone(),
                _ => s["properties"]["mike"].clone(),
            };
            assert_eq!(keys(&nested["properties"]), inner, "{label}: {s}");
            // The serialized text is in that order too.
            let text = s.to_string();
            let at = |name: &str| text.find(&format!("\"{name}\""));
            assert!(
                at("zulu") < at("alpha") && at("alpha") < at("mike") && at("mike") < at("bravo"),
                "{label}: {text}"
            );
        }
        // Strict mode requires every property, listed in that order.
        assert_eq!(def.openai_strictness(), Ok(()));
        assert_eq!(def.render(Provider::OpenAiChat)["function"]["parameters"]["required"], json!(top));
    }

    #[test]
    fn every_provider_survives_hostile_schemas() {
        for s in fixtures::hostile_schemas() {
            let schemas = ToolSchemas::new(s.clone(), Some(s.clone()));
            let _ = schemas.openai_strictness();
            let mut args = json!({"x": null, "y": [null, {"z": null}]});
            let _ = crate::arguments::canonicalize(&s, &mut args);
            if s.get("type").and_then(Value::as_str) == Some("object") {
                let def = fixtures::definition("hostile.tool", s);
                for provider in Provider::ALL {
                    let _ = def.render(provider);
                }
            }
        }
    }
}
