//! [`OllamaClient`]: Ollama's native `/api/chat`.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use keel_tools_core::Provider;
use serde_json::{Map, Value};

use crate::client::{Common, Settings, chat_model, client_accessors};
use crate::http::{Auth, http_builder_methods};
use crate::key::api_key_methods;
use crate::model::{ModelError, Turn, WireFormat};
use crate::options::{AllowedMode, ToolChoice, request_option_methods, tools_sent};
use crate::wire;

/// A client for Ollama's `POST /api/chat` with `"stream": false`.
///
/// Each turn sends the conversation, the view's [`ollama_schemas`](keel_tools_core::ToolView::ollama_schemas) as
/// `tools` (omitted when the view is empty), and any `options`; it reads `message.content` and
/// `message.tool_calls` (arguments are an object; a missing `id`, as on servers older than late 2025, becomes a
/// stable generated one). Results go back as `{"role": "tool", "tool_name", "tool_call_id", "content"}`.
///
/// ```no_run
/// # async fn demo() -> Result<(), keel_tools_agent::ModelError> {
/// let model = keel_tools_agent::OllamaClient::builder("http://localhost:11434", "qwen3")
///     .timeout(std::time::Duration::from_secs(60))
///     .option("temperature", 0)
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct OllamaClient {
    common: Common,
    options: Map<String, Value>,
    /// Whether the client has warned that it narrowed a turn's tool list for [`ToolChoice::Allowed`].
    warned: Arc<AtomicBool>,
}

/// Builds an [`OllamaClient`].
#[derive(Debug, Clone)]
#[must_use]
pub struct OllamaBuilder {
    settings: Settings,
    options: Map<String, Value>,
}

impl OllamaBuilder {
    http_builder_methods!("`think`, `keep_alive`, `format`", "`model`, `messages`, `tools` and `stream`");
    request_option_methods!("`options.temperature`", "`options.seed`", "`options.num_predict`");
    /// One of Ollama's `options` (`temperature`, `num_ctx`, `seed`, ...).
    pub fn option(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.options.insert(key.into(), value.into());
        self
    }
    api_key_methods!(
        "Authorization: Bearer <key>",
        "as Ollama's hosted API (`https://ollama.com`) wants; a local server needs none",
        "[`key::vars::OLLAMA`](crate::key::vars::OLLAMA)"
    );
    /// Checks the base URL and builds the client.
    pub fn build(self) -> Result<OllamaClient, ModelError> {
        let common = self.settings.build(|base, _, _| format!("{base}/api/chat"))?;
        Ok(OllamaClient { common, options: self.options, warned: Arc::default() })
    }
}

impl OllamaClient {
    /// A builder for `model` on the server at `base_url` (e.g. `http://localhost:11434`).
    pub fn builder(base_url: impl Into<String>, model: impl Into<String>) -> OllamaBuilder {
        OllamaBuilder { settings: Settings::new(base_url.into(), model.into()), options: Map::new() }
    }

    /// A client with the default limits.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Result<OllamaClient, ModelError> {
        OllamaClient::builder(base_url, model).build()
    }

    client_accessors!("`/api/chat`");

    /// The request body of one turn: the conversation, the tools, and the options set on the builder
    /// (temperature, seed and the most tokens go into `options`, over the same keys given with
    /// [`OllamaBuilder::option`]).
    ///
    /// `/api/chat` has no `tool_choice`: [`ToolChoice::None`] sends the turn without tools, [`ToolChoice::Auto`]
    /// with them, [`ToolChoice::Allowed`] with [`AllowedMode::Auto`] with only the allowed tools (which changes
    /// the tool list and so costs the prompt cache: [`ToolChoice::loss`]; the client warns once), and a choice
    /// that forces a call cannot be honoured.
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] for [`ToolChoice::Required`], [`ToolChoice::Tool`] or [`AllowedMode::Required`] (Ollama's OpenAI-compatible
    /// endpoint, [`OpenAiClient`](crate::OpenAiClient) at `{base}/v1`, takes them), or a named tool the turn does
    /// not have.
    pub fn request_body(&self, turn: &Turn<'_>) -> Result<Value, ModelError> {
        let choice = self.common.request.choice(turn)?;
        if let Some(
            ToolChoice::Required | ToolChoice::Tool(_) | ToolChoice::Allowed { mode: AllowedMode::Required, .. },
        ) = &choice
        {
            return Err(ModelError::config(format!(
                "Ollama's /api/chat has no tool_choice, so a tool call cannot be forced; use its OpenAI-compatible \
                 endpoint instead (OpenAiClient at {}/v1)",
                self.common.base
            )));
        }
        let mut body = self.common.body(true);
        let conversation = wire::conversation(turn.tools, WireFormat::Ollama, turn.messages);
        body.insert("messages".into(), Value::Array(conversation.messages));
        let codec = turn.tools.codec(Provider::Ollama);
        let tools = tools_sent(&codec, choice.as_ref(), &self.warned);
        if !tools.is_empty() && choice != Some(ToolChoice::None) {
            // One copy of each tool's shared rendering, straight into the body.
            body.insert("tools".into(), Value::Array(tools));
        }
        body.insert("stream".into(), Value::Bool(self.common.stream));
        let mut options = self.options.clone();
        if let Some(t) = self.common.request.temperature {
            options.insert("temperature".into(), t.into());
        }
        if let Some(seed) = self.common.request.seed {
            options.insert("seed".into(), seed.into());
        }
        if let Some(n) = self.common.request.max_tokens {
            options.insert("num_predict".into(), n.into());
        }
        if !options.is_empty() {
            body.insert("options".into(), Value::Object(options));
        }
        Ok(Value::Object(body))
    }
}

chat_model!(OllamaClient, "ollama", "ollama", Auth::Bearer, &[], WireFormat::Ollama);
