//! The tool list entries: [`ToolDefinition::render`] for one tool, [`ToolView::schemas`] for a view, each
//! provider's from its own module.
//!
//! | provider | name | schema |
//! |---|---|---|
//! | [`Provider::Ollama`] | `name` | fully inlined, unions and constraints folded into descriptions; the top level's description joins the function's |
//! | [`Provider::OpenAiChat`], [`Provider::OpenAiResponses`] | `wire_name` | inlined; strict when possible |
//! | [`Provider::Anthropic`] | `wire_name` | inlined, `$defs` only for recursion |
//! | [`Provider::Gemini`] | `wire_name` | inlined, `$defs` only for recursion; documented enums as plain `enum`s |
//! | [`Provider::Mcp`] | `name` | canonical, full JSON Schema 2020-12 (`$defs`, `$ref`, `$anchor`, `allOf`, `if`/`then`/`else` as written), plus `outputSchema` and annotations |
//!
//! Every rendering lists properties in the order they are declared (and `required` in that order), so the model
//! reads the arguments as the tool's author wrote them. Every renderer is a pure function of a tool's name,
//! description, schemas and hints; none of them panics, whatever the schema.

use std::borrow::Cow;

use serde_json::Value;

use super::format::Push;
use super::{LossKind, Strict, format};
use crate::registry::view::{ExecutorEntry, ToolDescriptions, ToolView};
use crate::tool_definition::ToolDefinition;
use crate::tool_schemas::Provider;
use keel_tools_schema::vocabulary;

impl ToolDefinition {
    /// This tool in `provider`'s format, rendered once and cached (see [`Codec`](crate::Codec) for the rest of
    /// each provider's side):
    ///
    /// * [`Provider::Ollama`]: `{"type": "function", "function": {"name", "description", "parameters"}}`;
    /// * [`Provider::OpenAiChat`]: `{"type": "function", "function": {"name", "description", "parameters",
    ///   "strict"}}`;
    /// * [`Provider::OpenAiResponses`]: `{"type": "function", "name", "description", "parameters", "strict"}`;
    /// * [`Provider::Anthropic`]: `{"name", "description", "input_schema"}`;
    /// * [`Provider::Gemini`]: a `functionDeclarations` entry `{"name", "description", "parametersJsonSchema"}`;
    /// * [`Provider::Mcp`]: a `tools/list` entry `{"name", "description", "inputSchema", "outputSchema"?,
    ///   "annotations"}`.
    ///
    /// Ollama and MCP use [`name`](ToolDefinition::name); the others the
    /// [`wire_name`](ToolDefinition::wire_name), as they do not accept dots.
    pub fn render(&self, provider: Provider) -> &Value {
        self.schemas().rendered[provider.slot()].get_or_init(|| format(provider).tool(self))
    }

    /// [`render`](ToolDefinition::render) as compact JSON text (exactly `serde_json::to_string` of it), made once
    /// and cached: what [`ToolList::to_json`](crate::registry::ToolList::to_json) joins, for a request body written as
    /// text without walking or copying the tree again.
    pub fn render_json(&self, provider: Provider) -> &str {
        self.schemas().rendered_json[provider.slot()].get_or_init(|| {
            // Serialising a `Value` cannot fail (its keys are strings); `null` keeps this total all the same.
            serde_json::to_string(self.render(provider)).unwrap_or_else(|_| "null".to_owned()).into_boxed_str()
        })
    }
}

/// The input schema the models are shown: `x-mcp-header` is for MCP transports, the models of the other providers
/// never see it.
pub(super) fn model_input(def: &ToolDefinition) -> Cow<'_, Value> {
    let input = def.input_schema();
    if vocabulary::has_mcp_headers(input) {
        let mut stripped = input.clone();
        vocabulary::strip_mcp_headers(&mut stripped);
        Cow::Owned(stripped)
    } else {
        Cow::Borrowed(input)
    }
}

/// Writes the tool's examples at the end of the description at `at` in `entry`, for the providers whose entries
/// have no place of their own for them: a paragraph `Example arguments:` and each example as compact JSON on a line
/// of its own. A tool without examples is left as it is.
pub(super) fn fold_examples(def: &ToolDefinition, entry: &mut Value, at: &str) {
    if def.examples().is_empty() {
        return;
    }
    let Some(Value::String(description)) = entry.pointer_mut(at) else { return };
    description.push_str(if description.trim().is_empty() { "Example arguments:" } else { "\n\nExample arguments:" });
    for example in def.examples() {
        description.push('\n');
        description.push_str(&example.to_string());
    }
}

/// The loss [`fold_examples`] makes: the examples are in the description at `at`, not in a field of their own.
pub(super) fn examples_loss(def: &ToolDefinition, at: &str, push: &mut Push<'_>) {
    let n = def.examples().len();
    if n > 0 {
        push(
            at.to_owned(),
            LossKind::Adapted,
            format!(
                "the format has no field for input examples, so the tool's {} stated at the end of the \
                 description (`Example arguments:`)",
                if n == 1 { "example is".to_owned() } else { format!("{n} examples are") }
            ),
        );
    }
}

impl ToolView {
    /// The view's tools in `provider`'s format, in name order, as a list of this view's own. The same list as
    /// [`Codec::tools`](crate::Codec::tools) of this view's codec for `provider`.
    ///
    /// Each tool is rendered once and cached on its definition; the first call on a view copies those renderings
    /// into the view's list (about a kilobyte of JSON per tool), later calls return it. For a view made per turn,
    /// [`ToolView::tool_list`] lends the same entries without copying them.
    pub fn schemas(&self, provider: Provider) -> &[Value] {
        self.rendered(provider, Strict::Auto).get_or_init(|| self.tool_list(provider).to_vec())
    }

    /// [`ToolView::schemas`] with the strict mode as `strict` says ([`Codec::with_strict`](crate::Codec::with_strict)).
    pub(crate) fn schemas_strict(&self, provider: Provider, strict: Strict) -> &[Value] {
        self.rendered(provider, strict).get_or_init(|| self.tool_list(provider).with_strict(strict).to_vec())
    }

    /// The view's tools as Ollama `/api/chat` `tools` entries: the documented shorthand for
    /// `schemas(Provider::Ollama)`.
    pub fn ollama_schemas(&self) -> &[Value] {
        self.schemas(Provider::Ollama)
    }

    /// Both views of the same tools: what the model sees and what the executor
    /// holds. Their name sets are equal by construction; tests assert it.
    pub fn describe_tools(&self) -> ToolDescriptions {
        ToolDescriptions {
            model_visible: self.ollama_schemas().to_vec(),
            executor: self
                .iter()
                .map(|d| ExecutorEntry {
                    name: d.name().to_owned(),
                    version: d.version().to_owned(),
                    effect: d.effect(),
                    idempotent: d.idempotent(),
                    timeout_ms: d.timeout().map(|t| t.as_millis() as u64),
                    origin: d.origin().to_string(),
                })
                .collect(),
        }
    }
}
