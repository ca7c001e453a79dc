//! [`Strict`]: whether tools are sent in a provider's strict mode, chosen per codec (and so per client).

use serde_json::Value;

use super::entry::model_input;
use super::{Codec, Loss, LossKind};
use crate::tool_definition::ToolDefinition;
use crate::tool_schemas::{Provider, Strict, rendering_slot};
use keel_tools_schema::dialect::{anthropic_strict, openai_strict};

/// The entry of `def` for `provider` in the form `strict` asks for, made from the default entry (so that whatever
/// else the entry carries stays as it is).
fn variant(def: &ToolDefinition, provider: Provider, strict: Strict) -> Value {
    let mut entry = def.render(provider).clone();
    match provider {
        Provider::OpenAiChat | Provider::OpenAiResponses => {
            let (parameters, flag) = if provider == Provider::OpenAiChat {
                ("/function/parameters", "/function/strict")
            } else {
                ("/parameters", "/strict")
            };
            if entry.pointer(flag) == Some(&Value::Bool(true)) {
                if let Some(p) = entry.pointer_mut(parameters) {
                    *p = openai_strict::loose_parameters(&model_input(def));
                }
                if let Some(f) = entry.pointer_mut(flag) {
                    *f = Value::Bool(false);
                }
            }
        }
        Provider::Anthropic if strict.wanted(provider) => {
            let input = anthropic_strict::input_schema(&model_input(def));
            if input.strict.is_ok()
                && let Value::Object(map) = &mut entry
            {
                map.insert("input_schema".to_owned(), input.schema);
                map.insert("strict".to_owned(), Value::Bool(true));
            }
        }
        _ => {}
    }
    entry
}

impl ToolDefinition {
    /// This tool in `provider`'s format with `strict` mode as chosen ([`Strict`]), rendered once and cached: the
    /// same as [`render`](ToolDefinition::render) under [`Strict::Auto`].
    pub fn render_strict(&self, provider: Provider, strict: Strict) -> &Value {
        let at = rendering_slot(provider, strict);
        if at == provider.slot() {
            return self.render(provider);
        }
        self.schemas().rendered[at].get_or_init(|| variant(self, provider, strict))
    }

    /// [`render_strict`](ToolDefinition::render_strict) as compact JSON text, made once and cached.
    pub fn render_json_strict(&self, provider: Provider, strict: Strict) -> &str {
        let at = rendering_slot(provider, strict);
        if at == provider.slot() {
            return self.render_json(provider);
        }
        self.schemas().rendered_json[at].get_or_init(|| {
            serde_json::to_string(self.render_strict(provider, strict))
                .unwrap_or_else(|_| "null".to_owned())
                .into_boxed_str()
        })
    }

    /// Whether the tool can be sent to Anthropic with `"strict": true`: `Ok(())`, or why not, e.g. "field `labels`
    /// is a map (additionalProperties is a schema); Anthropic strict tool use needs every object closed". See
    /// [`Strict`].
    pub fn anthropic_strictness(&self) -> Result<(), String> {
        if self.render_strict(Provider::Anthropic, Strict::Required).get("strict") == Some(&Value::Bool(true)) {
            Ok(())
        } else {
            anthropic_strict::input_schema(&model_input(self)).strict.and(Err(
                "the arguments are not an object schema; Anthropic strict tool use needs one object at the top level"
                    .to_owned(),
            ))
        }
    }

    /// Whether the tool can be sent in `provider`'s strict mode: `Ok(())`, or why not
    /// ([`openai_strictness`](ToolDefinition::openai_strictness) for both OpenAI APIs,
    /// [`anthropic_strictness`](ToolDefinition::anthropic_strictness)); for a provider with no strict mode
    /// (Ollama, Gemini, MCP), an error that says so.
    pub fn strictness(&self, provider: Provider) -> Result<(), String> {
        match provider {
            Provider::OpenAiChat | Provider::OpenAiResponses => self.openai_strictness(),
            Provider::Anthropic => self.anthropic_strictness(),
            other => Err(format!("{} has no strict mode for tools", other.as_str())),
        }
    }
}

impl Codec {
    /// The same codec, sending its tools in the provider's strict mode as `strict` says (the default is
    /// [`Strict::Auto`]): its [`tools`](Codec::tools), [`tool_list`](Codec::tool_list), [`tool`](Codec::tool) and
    /// [`losses`](Codec::losses) follow it.
    pub fn with_strict(mut self, strict: Strict) -> Codec {
        self.strict = strict;
        self
    }

    /// The strict-mode setting ([`Codec::with_strict`]).
    pub fn strict(&self) -> Strict {
        self.strict
    }

    /// The view's tools that are not sent strict although the setting asks for strict mode
    /// ([`Strict::WhenPossible`], [`Strict::Required`], and [`Strict::Auto`] for OpenAI), each with why
    /// ([`ToolDefinition::strictness`]); empty when every tool is strict, or when the setting asks for none. Under
    /// [`Strict::Required`] each is an error: the clients refuse to send the turn, naming them.
    pub fn not_strict(&self) -> Vec<(String, String)> {
        let wanted = self.strict.wanted(self.provider) || (self.strict == Strict::Required);
        if !wanted {
            return Vec::new();
        }
        self.view
            .iter()
            .filter_map(|def| def.strictness(self.provider).err().map(|why| (def.name().to_owned(), why)))
            .collect()
    }

    /// The losses of the entries as this codec's [`Strict`] setting sends them, where they differ from the
    /// default's: with strict mode off for OpenAI, nothing strict-mode related; with Anthropic's strict mode asked
    /// for, each tool that cannot be strict.
    pub(super) fn strict_losses(&self, def: &ToolDefinition, out: &mut Vec<Loss>) {
        let loss = |kind: LossKind, at: &str, message: String| Loss {
            provider: self.provider,
            tool: def.name().to_owned(),
            at: at.to_owned(),
            kind,
            message,
        };
        match (self.provider, self.strict) {
            (Provider::OpenAiChat | Provider::OpenAiResponses, Strict::Off) => {
                // Sent as the canonical schema: only the wire name is adapted.
                out.retain(|l| l.tool != def.name() || l.message.contains("wire name"));
            }
            (Provider::OpenAiChat | Provider::OpenAiResponses, Strict::Required) => {
                if let Err(why) = def.openai_strictness() {
                    out.retain(|l| l.tool != def.name() || !l.message.starts_with("cannot be strict"));
                    out.push(loss(
                        LossKind::Rejected,
                        "",
                        format!("cannot be strict, and Strict::Required refuses to send it otherwise: {why}"),
                    ));
                }
            }
            (Provider::Anthropic, Strict::WhenPossible | Strict::Required) => {
                if let Err(why) = def.anthropic_strictness() {
                    let (kind, consequence) = if self.strict == Strict::Required {
                        (LossKind::Rejected, "Strict::Required refuses to send it otherwise")
                    } else {
                        (
                            LossKind::Dropped,
                            "it is sent without \"strict\", and the model may send arguments that do not match, \
                             which the executor answers with invalid_arguments",
                        )
                    };
                    out.push(loss(kind, "/strict", format!("cannot be strict: {why}; {consequence}")));
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::registry::view::ToolView;
    use crate::tool_schemas::fixtures::{self, Labelled, Node, Strictable};

    #[test]
    fn the_default_is_auto_and_renders_as_before() {
        let def = fixtures::definition("incident.search", fixtures::schema::<Strictable>());
        for provider in Provider::ALL {
            assert!(std::ptr::eq(def.render_strict(provider, Strict::Auto), def.render(provider)));
            assert_eq!(def.render_json_strict(provider, Strict::Auto), def.render_json(provider));
        }
        assert!(def.render(Provider::Anthropic).get("strict").is_none());
    }

    #[test]
    fn openai_off_sends_the_loose_schema_and_no_strict_losses() {
        let def = Arc::new(fixtures::definition("incident.search", fixtures::schema::<Strictable>()));
        let off = def.render_strict(Provider::OpenAiChat, Strict::Off);
        assert_eq!(off["function"]["strict"], false);
        // Optional properties stay optional: the canonical shape.
        let required = off["function"]["parameters"]["required"].clone();
        assert_ne!(required, def.render(Provider::OpenAiChat)["function"]["parameters"]["required"]);
        assert_eq!(def.render_strict(Provider::OpenAiResponses, Strict::Off)["strict"], false);
        let text = def.render_json_strict(Provider::OpenAiChat, Strict::Off);
        assert_eq!(serde_json::from_str::<Value>(text).unwrap(), *off);
        let view = ToolView::new(vec![def]);
        let codec = view.codec(Provider::OpenAiChat).with_strict(Strict::Off);
        assert!(
            codec.losses().iter().all(|l| l.tool == "*" || l.message.contains("wire name")),
            "{:#?}",
            codec.losses()
        );
        assert!(codec.not_strict().is_empty());
        assert_eq!(codec.tools()[0]["function"]["strict"], false);
        assert_eq!(codec.tool_list().get(0).unwrap()["function"]["strict"], false);
    }

    #[test]
    fn anthropic_strict_when_asked_and_reported_when_impossible() {
        let ok = Arc::new(fixtures::definition("incident.search", fixtures::schema::<Strictable>()));
        let map = Arc::new(fixtures::definition("incident.label", fixtures::schema::<Labelled>()));
        let tree = Arc::new(fixtures::definition("tree.put", fixtures::schema::<Node>()));
        assert_eq!(ok.anthropic_strictness(), Ok(()));
        let strict = ok.render_strict(Provider::Anthropic, Strict::WhenPossible);
        assert_eq!(strict["strict"], true);
        assert_eq!(strict["input_schema"]["additionalProperties"], false);
        let reason = map.anthropic_strictness().unwrap_err();
        assert!(reason.contains("field `labels` is a map"), "{reason}");
        assert!(tree.anthropic_strictness().unwrap_err().contains("recursive"));
        assert!(map.render_strict(Provider::Anthropic, Strict::Required).get("strict").is_none());

        let view = ToolView::new(vec![ok.clone(), map.clone(), tree.clone()]);
        let codec = view.codec(Provider::Anthropic).with_strict(Strict::WhenPossible);
        let names: Vec<String> = codec.not_strict().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["incident.label", "tree.put"]);
        let losses = codec.losses();
        let dropped: Vec<&Loss> = losses.iter().filter(|l| l.at == "/strict").collect();
        assert_eq!(dropped.len(), 2);
        assert!(dropped.iter().all(|l| l.kind == LossKind::Dropped && l.message.starts_with("cannot be strict")));
        let required = view.codec(Provider::Anthropic).with_strict(Strict::Required);
        assert!(required.losses().iter().any(|l| l.kind == LossKind::Rejected && l.tool == "incident.label"));
        // Auto asks for nothing on Anthropic.
        assert!(view.codec(Provider::Anthropic).not_strict().is_empty());
        assert_eq!(view.codec(Provider::Gemini).with_strict(Strict::Required).not_strict().len(), 3);
        assert_eq!(ok.strictness(Provider::Gemini), Err("gemini has no strict mode for tools".to_owned()));
    }

    #[test]
    fn openai_required_names_the_tools_that_cannot_be() {
        let map = Arc::new(fixtures::definition("incident.label", fixtures::schema::<Labelled>()));
        let view = ToolView::new(vec![map]);
        let codec = view.codec(Provider::OpenAiResponses).with_strict(Strict::Required);
        let not = codec.not_strict();
        assert_eq!(not.len(), 1);
        assert!(not[0].1.contains("is a map"), "{not:?}");
        assert!(codec.losses().iter().any(|l| l.kind == LossKind::Rejected));
        assert_eq!(view.codec(Provider::OpenAiResponses).not_strict().len(), 1, "Auto asks for strict on OpenAI");
        assert!(view.codec(Provider::OpenAiResponses).with_strict(Strict::Off).not_strict().is_empty());
    }
}
