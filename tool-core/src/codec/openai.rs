//! OpenAI: Chat Completions ([`Chat`]) and Responses ([`Responses`]), and what both APIs share: the `tools`
//! entry's `parameters`, in strict mode whenever the schema allows it ([`strict`]), and what an entry loses.
//!
//! Both APIs take the same `parameters` and `strict` flag; they differ only in the envelope (Chat nests them under
//! `function`). Names are [`ToolDefinition::wire_name`](crate::definition::ToolDefinition::wire_name)s
//! (`incident.search` is sent as `incident-search`), as OpenAI only accepts `[A-Za-z0-9_-]{1,64}`.

mod chat;
mod responses;
mod strict;

use serde_json::Value;

pub(super) use chat::Chat;
pub(super) use responses::Responses;
use strict::{FOLDED, STRICT_FORMATS};

use super::LossKind;
use super::format::Push;
use super::loss::{join_keywords, nearest, show_path, walk, wire_name_loss};
use crate::tool_definition::ToolDefinition;
use crate::tool_schemas::{Provider, ToolSchemas};
use keel_tools_schema::transform::{self, NUMERIC_FORMATS, OnRecursion};
use keel_tools_schema::vocabulary;

impl ToolDefinition {
    /// Whether the tool is sent to OpenAI in strict mode: `Ok(())`, or why not. See
    /// [`ToolSchemas::openai_strictness`].
    pub fn openai_strictness(&self) -> Result<(), String> {
        if self.render(Provider::OpenAiChat).pointer("/function/strict") == Some(&Value::Bool(true)) {
            Ok(())
        } else {
            self.schemas().openai_strictness()
        }
    }
}

impl ToolSchemas {
    /// Whether a tool with these schemas is sent to OpenAI in strict mode: `Ok(())`, or the reason it is sent with
    /// `"strict": false`, e.g. "field `labels` is a map (additionalProperties is a schema); OpenAI strict mode
    /// needs every object closed".
    pub fn openai_strictness(&self) -> Result<(), String> {
        strict::parameters(self.input()).strict
    }
}

/// Where the parts of a tool's entry are, in one OpenAI API's envelope.
pub(super) struct Envelope {
    pub(super) name: &'static str,
    pub(super) parameters: &'static str,
    pub(super) strict: &'static str,
}

/// The entry's losses, the same for both APIs: a schema that cannot be strict, or what strict mode does not take
/// and keel says in the description instead; and the wire name.
fn entry_losses(def: &ToolDefinition, entry: &Value, at: &Envelope, push: &mut Push<'_>) {
    match def.openai_strictness() {
        Err(reason) => push(
            at.strict.to_owned(),
            LossKind::Dropped,
            format!(
                "cannot be strict, so it is sent with \"strict\": false (Chat Completions and Responses): {reason}; \
                 the model may send arguments that do not match, which the executor answers with invalid_arguments"
            ),
        ),
        Ok(()) => {
            let inlined = transform::inline_refs(def.input_schema(), OnRecursion::Stub).schema;
            walk(&inlined, &mut |path, pointer, map| {
                let mut folded: Vec<&str> =
                    FOLDED.iter().copied().filter(|k| map.get(*k).is_some_and(|v| v != &Value::Bool(false))).collect();
                if let Some(Value::String(f)) = map.get("format")
                    && !STRICT_FORMATS.contains(&f.as_str())
                    && !NUMERIC_FORMATS.contains(&f.as_str())
                {
                    folded.push("format");
                }
                folded.sort_unstable();
                let (notes, folded): (Vec<&str>, Vec<&str>) =
                    folded.into_iter().partition(|k| vocabulary::asserts_nothing(k));
                // The strict form nests what the canonical one has at the same places, or near them.
                let at = nearest(entry, &format!("{}{pointer}", at.parameters));
                if !folded.is_empty() {
                    push(
                        at.clone(),
                        LossKind::Adapted,
                        format!(
                            "{}: strict mode does not take {}; keel states them in the description and the \
                             executor enforces them",
                            show_path(path),
                            join_keywords(&folded)
                        ),
                    );
                }
                if !notes.is_empty() {
                    push(
                        at,
                        LossKind::Adapted,
                        format!(
                            "{}: strict mode does not take the annotation(s) {}; keel states them in the description",
                            show_path(path),
                            join_keywords(&notes)
                        ),
                    );
                }
            });
        }
    }
    wire_name_loss(def, "OpenAI", at.name, push);
}
