//! [`OllamaClient`]: Ollama's native `/api/chat`.

use keel_tools_core::Provider;
use serde_json::{Map, Value};

use crate::http::{Http, HttpConfig, client_parts, http_builder_methods};
use crate::key::{ApiKey, api_key_methods, check_key_transport};
use crate::model::{AssistantMessage, BoxFuture, ChatModel, Mode, ModelError, Turn};
use crate::options::{RequestOptions, ToolChoice, request_option_methods};
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
    base: String,
    url: String,
    model: String,
    api_key: Option<ApiKey>,
    http: Http,
    options: Map<String, Value>,
    extra: Map<String, Value>,
    request: RequestOptions,
}

/// Builds an [`OllamaClient`].
#[derive(Debug, Clone)]
#[must_use]
pub struct OllamaBuilder {
    base: String,
    model: String,
    api_key: Option<ApiKey>,
    http: HttpConfig,
    roots: Vec<Vec<u8>>,
    options: Map<String, Value>,
    extra: Map<String, Value>,
    request: RequestOptions,
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
        "as Ollama's hosted API (`https://ollama.com`) wants; a local server needs none",
        "[`key::vars::OLLAMA`](crate::key::vars::OLLAMA)"
    );
    /// Checks the base URL and builds the client.
    pub fn build(self) -> Result<OllamaClient, ModelError> {
        let (base, http) = client_parts(&self.base, &self.model, self.http, &self.roots)?;
        check_key_transport(&base, self.api_key.as_ref())?;
        Ok(OllamaClient {
            url: format!("{base}/api/chat"),
            base,
            model: self.model,
            api_key: self.api_key,
            http,
            options: self.options,
            extra: self.extra,
            request: self.request,
        })
    }
}

impl OllamaClient {
    /// A builder for `model` on the server at `base_url` (e.g. `http://localhost:11434`).
    pub fn builder(base_url: impl Into<String>, model: impl Into<String>) -> OllamaBuilder {
        OllamaBuilder {
            base: base_url.into(),
            model: model.into(),
            api_key: None,
            http: HttpConfig::default(),
            roots: Vec::new(),
            options: Map::new(),
            extra: Map::new(),
            request: RequestOptions::default(),
        }
    }

    /// A client with the default limits.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Result<OllamaClient, ModelError> {
        OllamaClient::builder(base_url, model).build()
    }

    /// The `/api/chat` URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The model name.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The HTTP limits.
    pub fn http_config(&self) -> HttpConfig {
        self.http.config()
    }

    /// The request body of one turn: the conversation, the tools, and the options set on the builder
    /// (temperature, seed and the most tokens go into `options`, over the same keys given with
    /// [`OllamaBuilder::option`]).
    ///
    /// `/api/chat` has no `tool_choice`: [`ToolChoice::None`] sends the turn without tools, [`ToolChoice::Auto`]
    /// with them, and a choice that forces a call cannot be honoured.
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] for [`ToolChoice::Required`] or [`ToolChoice::Tool`] (Ollama's OpenAI-compatible
    /// endpoint, [`OpenAiClient`](crate::OpenAiClient) at `{base}/v1`, takes them), or a named tool the turn does
    /// not have.
    pub fn request_body(&self, turn: &Turn<'_>) -> Result<Value, ModelError> {
        let choice = self.request.choice(turn)?;
        if let Some(ToolChoice::Required | ToolChoice::Tool(_)) = &choice {
            return Err(ModelError::config(format!(
                "Ollama's /api/chat has no tool_choice, so a tool call cannot be forced; use its OpenAI-compatible \
                 endpoint instead (OpenAiClient at {}/v1)",
                self.base
            )));
        }
        let mut body = self.extra.clone();
        body.insert("model".into(), Value::String(self.model.clone()));
        body.insert("messages".into(), Value::Array(wire::ollama_messages(turn.tools, turn.messages)));
        let codec = turn.tools.codec(Provider::Ollama);
        let tools = codec.tool_list();
        if !tools.is_empty() && choice != Some(ToolChoice::None) {
            // One copy of each tool's shared rendering, straight into the body.
            body.insert("tools".into(), Value::Array(tools.to_vec()));
        }
        body.insert("stream".into(), Value::Bool(false));
        let mut options = self.options.clone();
        if let Some(t) = self.request.temperature {
            options.insert("temperature".into(), t.into());
        }
        if let Some(seed) = self.request.seed {
            options.insert("seed".into(), seed.into());
        }
        if let Some(n) = self.request.max_tokens {
            options.insert("num_predict".into(), n.into());
        }
        if !options.is_empty() {
            body.insert("options".into(), Value::Object(options));
        }
        Ok(Value::Object(body))
    }
}

impl ChatModel for OllamaClient {
    fn mode(&self) -> Mode {
        Mode::Live
    }

    fn label(&self) -> String {
        format!("ollama {} at {}", self.model, self.base)
    }

    fn telemetry(&self) -> Option<(&str, &'static str)> {
        Some((&self.model, "ollama"))
    }

    fn chat<'a>(&'a self, turn: Turn<'a>) -> BoxFuture<'a, Result<AssistantMessage, ModelError>> {
        Box::pin(async move {
            let body = self.request_body(&turn)?;
            let response = self.http.post_json(&self.url, &body, self.api_key.as_ref()).await?;
            wire::parse_ollama(&response, turn.tools, turn.calls_so_far(), Mode::Live)
        })
    }
}
