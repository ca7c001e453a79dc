//! [`OpenAiClient`]: OpenAI-compatible Chat Completions (OpenAI, Ollama's `/v1`, vLLM, llama.cpp, ...).

use std::fmt;

use keel_tools_core::Provider;
use serde_json::{Map, Value, json};

use crate::http::{Http, HttpConfig, client_parts, http_builder_methods};
use crate::key::{ApiKey, api_key_methods, check_key_transport};
use crate::model::{AssistantMessage, BoxFuture, ChatModel, Mode, ModelError, Turn};
use crate::options::{RequestOptions, ToolChoice, request_option_methods};
use crate::wire;

/// A client for `POST {base}/chat/completions`.
///
/// Everything OpenAI-shaped goes through the OpenAI Chat [`Codec`](keel_tools_core::Codec) of the turn's view: each
/// turn sends the conversation and the codec's tool list (wire names such as `incident-search`, strict mode where
/// the schema allows); tool calls come back with wire names and `arguments` as JSON text, and the codec maps the
/// names back; results go back as the codec's `{"role": "tool", "tool_call_id", "content"}` replies.
///
/// ```no_run
/// # async fn demo() -> Result<(), keel_tools_agent::ModelError> {
/// // Ollama speaks Chat Completions under /v1 too.
/// let model = keel_tools_agent::OpenAiClient::builder("http://localhost:11434/v1", "qwen3").build()?;
/// // HTTPS needs keel-tools-agent's `rustls` feature.
/// let openai = keel_tools_agent::OpenAiClient::builder("https://api.openai.com/v1", "gpt-4.1-mini")
///     .api_key_from_env(keel_tools_agent::key::vars::OPENAI)?
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct OpenAiClient {
    base: String,
    url: String,
    model: String,
    api_key: Option<ApiKey>,
    http: Http,
    extra: Map<String, Value>,
    request: RequestOptions,
}

impl fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .finish_non_exhaustive()
    }
}

/// Builds an [`OpenAiClient`].
#[derive(Clone)]
#[must_use]
pub struct OpenAiBuilder {
    base: String,
    model: String,
    api_key: Option<ApiKey>,
    http: HttpConfig,
    roots: Vec<Vec<u8>>,
    extra: Map<String, Value>,
    request: RequestOptions,
}

impl fmt::Debug for OpenAiBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiBuilder")
            .field("base", &self.base)
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .finish_non_exhaustive()
    }
}

impl OpenAiBuilder {
    api_key_methods!("as OpenAI's API wants", "[`key::vars::OPENAI`](crate::key::vars::OPENAI)");
    http_builder_methods!(
        "`parallel_tool_calls`, `top_p`, `stop`, `response_format`",
        "`model`, `messages`, `tools` and the options below (`tool_choice`, `temperature`, `seed`, `max_tokens`)"
    );
    request_option_methods!("`temperature`", "`seed`", "`max_tokens`");
    /// Checks the base URL and builds the client.
    pub fn build(self) -> Result<OpenAiClient, ModelError> {
        let (base, http) = client_parts(&self.base, &self.model, self.http, &self.roots)?;
        check_key_transport(&base, self.api_key.as_ref())?;
        Ok(OpenAiClient {
            url: format!("{base}/chat/completions"),
            base,
            model: self.model,
            api_key: self.api_key,
            http,
            extra: self.extra,
            request: self.request,
        })
    }
}

impl OpenAiClient {
    /// A builder for `model` at `base_url`, the URL that ends before `/chat/completions` (e.g.
    /// `https://api.openai.com/v1`, `http://localhost:11434/v1`).
    pub fn builder(base_url: impl Into<String>, model: impl Into<String>) -> OpenAiBuilder {
        OpenAiBuilder {
            base: base_url.into(),
            model: model.into(),
            api_key: None,
            http: HttpConfig::default(),
            roots: Vec::new(),
            extra: Map::new(),
            request: RequestOptions::default(),
        }
    }

    /// A client with the default limits and no API key.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Result<OpenAiClient, ModelError> {
        OpenAiClient::builder(base_url, model).build()
    }

    /// The `/chat/completions` URL.
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

    /// The request body of one turn: the conversation, the tools, and the options set on the builder (a
    /// named [`ToolChoice`] as `{"type": "function", "function": {"name": <wire name>}}`; no `tool_choice` when
    /// the turn has no tools).
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] when the turn's [`ToolChoice`] names a tool the turn does not have, or requires a
    /// call in a turn without tools.
    pub fn request_body(&self, turn: &Turn<'_>) -> Result<Value, ModelError> {
        let mut body = self.extra.clone();
        body.insert("model".into(), Value::String(self.model.clone()));
        body.insert("messages".into(), Value::Array(wire::openai_messages(turn.tools, turn.messages)));
        let codec = turn.tools.codec(Provider::OpenAiChat);
        let tools = codec.tool_list();
        if !tools.is_empty() {
            // One copy of each tool's shared rendering, straight into the body.
            body.insert("tools".into(), Value::Array(tools.to_vec()));
        }
        if let Some(choice) = self.request.choice(turn)?
            && !tools.is_empty()
        {
            let choice = match choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": codec.shown_name(&name)}}),
            };
            body.insert("tool_choice".into(), choice);
        }
        if let Some(t) = self.request.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(seed) = self.request.seed {
            body.insert("seed".into(), json!(seed));
        }
        if let Some(n) = self.request.max_tokens {
            body.insert("max_tokens".into(), json!(n));
        }
        Ok(Value::Object(body))
    }
}

impl ChatModel for OpenAiClient {
    fn mode(&self) -> Mode {
        Mode::Live
    }

    fn label(&self) -> String {
        format!("openai-compatible {} at {}", self.model, self.base)
    }

    fn telemetry(&self) -> Option<(&str, &'static str)> {
        Some((&self.model, "openai"))
    }

    fn chat<'a>(&'a self, turn: Turn<'a>) -> BoxFuture<'a, Result<AssistantMessage, ModelError>> {
        Box::pin(async move {
            let body = self.request_body(&turn)?;
            let response = self.http.post_json(&self.url, &body, self.api_key.as_ref()).await?;
            wire::parse_openai(&response, turn.tools, turn.calls_so_far(), Mode::Live)
        })
    }
}
