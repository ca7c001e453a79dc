//! [`AnthropicClient`]: Anthropic's Messages API.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use keel_tools_core::Provider;
use serde_json::{Value, json};

use crate::client::{Common, Settings, chat_model, client_accessors};
use crate::http::{Auth, http_builder_methods};
use crate::key::api_key_methods;
use crate::model::{ModelError, Turn, WireFormat};
use crate::options::{AllowedMode, ToolChoice, request_option_methods, strict_method, tool_search_method, tools_sent};
use crate::wire;

/// The `anthropic-version` header every request carries.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// What `max_tokens` is when the builder sets none: the Messages API requires one.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// A client for `POST {base}/v1/messages`.
///
/// Everything goes through the Anthropic [`Codec`](keel_tools_core::Codec) of the turn's view: the tools are sent
/// as `{"name", "description", "input_schema"}` under their wire names (`incident-search`); `tool_use` blocks come
/// back with object `input`, and the codec maps the names back; the results of one turn go back as `tool_result`
/// blocks in one `user` message. System messages become the top-level `system`.
///
/// The key goes in `x-api-key`, with `anthropic-version: 2023-06-01`. `max_tokens` is required by the API:
/// [`DEFAULT_MAX_TOKENS`] unless set. The API has no seed: a client with one is refused by `build`.
///
/// ```no_run
/// # async fn demo() -> Result<(), keel_tools_agent::ModelError> {
/// let model = keel_tools_agent::AnthropicClient::builder("https://api.anthropic.com", "claude-sonnet-4-5")
///     .api_key_from_env(keel_tools_agent::key::vars::ANTHROPIC)?
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct AnthropicClient {
    common: Common,
    /// Whether the client has warned that it narrowed a turn's tool list for [`ToolChoice::Allowed`].
    warned: Arc<AtomicBool>,
}

/// Builds an [`AnthropicClient`].
#[derive(Debug, Clone)]
#[must_use]
pub struct AnthropicBuilder {
    settings: Settings,
}

impl AnthropicBuilder {
    api_key_methods!(
        "x-api-key: <key>",
        "as Anthropic's API wants",
        "[`key::vars::ANTHROPIC`](crate::key::vars::ANTHROPIC)"
    );
    http_builder_methods!(
        "`top_p`, `top_k`, `stop_sequences`, `metadata`, `thinking`",
        "`model`, `messages`, `system`, `tools` and the options below (`tool_choice`, `temperature`, `max_tokens`)"
    );
    request_option_methods!("`temperature`", "nothing: the API has none, and `build` refuses it", "`max_tokens`");
    strict_method!(
        "no strict tool use (`Strict::WhenPossible` sends `\"strict\": true` on every tool whose schema allows it)"
    );
    tool_search_method!(
        "every tool, the deferred ones with `\"defer_loading\": true`, and Anthropic's `tool_search_tool_bm25` server tool"
    );
    /// Checks the base URL and builds the client.
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] as for every client (the URL, the model name, the key's transport), and when a seed
    /// is set: the Messages API has none.
    pub fn build(self) -> Result<AnthropicClient, ModelError> {
        let common =
            self.settings.build_without_seed("Anthropic's Messages API", |base, _, _| format!("{base}/v1/messages"))?;
        Ok(AnthropicClient { common, warned: Arc::default() })
    }
}

impl AnthropicClient {
    /// A builder for `model` at `base_url`, the URL before `/v1/messages` (`https://api.anthropic.com`).
    pub fn builder(base_url: impl Into<String>, model: impl Into<String>) -> AnthropicBuilder {
        AnthropicBuilder { settings: Settings::new(base_url.into(), model.into()) }
    }

    client_accessors!("`/v1/messages`");

    /// The request body of one turn: the conversation (system messages as `system`), the tools, and the options
    /// set on the builder (a named [`ToolChoice`] as `{"type": "tool", "name": <wire name>}`, [`ToolChoice::Required`]
    /// as `{"type": "any"}`; no `tool_choice` when the turn has no tools).
    ///
    /// The Messages API has no choice that allows a subset of the tools: for [`ToolChoice::Allowed`] the turn is
    /// sent only the allowed tools, with `{"type": "auto"}` or `{"type": "any"}`, which changes the tool list
    /// and so costs the prompt cache ([`ToolChoice::loss`]; the client warns once).
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] when the turn's [`ToolChoice`] names a tool the turn does not have, or requires a
    /// call in a turn without tools.
    pub fn request_body(&self, turn: &Turn<'_>) -> Result<Value, ModelError> {
        let turn = &crate::deferral::prepare(*turn, self.common.request.tool_search, Provider::Anthropic);
        let mut body = self.common.body(true);
        let conversation = wire::conversation(turn.tools, WireFormat::Anthropic, turn.messages);
        if let Some(system) = conversation.system {
            body.insert("system".into(), Value::String(system));
        }
        body.insert("messages".into(), Value::Array(conversation.messages));
        let request = &self.common.request;
        let codec = request.codec(turn, Provider::Anthropic)?;
        let choice = request.choice(turn)?;
        let mut tools = tools_sent(&codec, choice.as_ref(), &self.warned);
        if turn.native_search {
            tools = crate::deferral::native_entries(turn.tools, tools, Provider::Anthropic);
        }
        if !tools.is_empty() {
            body.insert("tools".into(), Value::Array(tools));
        }
        if let Some(choice) = choice
            && body.contains_key("tools")
        {
            let choice = match choice {
                ToolChoice::Auto | ToolChoice::Allowed { mode: AllowedMode::Auto, .. } => json!({"type": "auto"}),
                ToolChoice::None => json!({"type": "none"}),
                ToolChoice::Required | ToolChoice::Allowed { mode: AllowedMode::Required, .. } => {
                    json!({"type": "any"})
                }
                ToolChoice::Tool(name) => json!({"type": "tool", "name": codec.shown_name(&name)}),
            };
            body.insert("tool_choice".into(), choice);
        }
        if let Some(t) = request.temperature {
            body.insert("temperature".into(), json!(t));
        }
        body.insert("max_tokens".into(), json!(request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)));
        self.common.stream_field(&mut body);
        Ok(Value::Object(body))
    }
}

chat_model!(
    AnthropicClient,
    "anthropic",
    "anthropic",
    Auth::Header("x-api-key"),
    &[("anthropic-version", ANTHROPIC_VERSION)],
    WireFormat::Anthropic
);
