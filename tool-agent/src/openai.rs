//! [`OpenAiClient`]: OpenAI-compatible Chat Completions (OpenAI, Ollama's `/v1`, vLLM, llama.cpp, ...).

use keel_tools_core::Provider;
use serde_json::{Value, json};

use crate::client::{Common, Settings, chat_model, client_accessors};
use crate::http::{Auth, http_builder_methods};
use crate::key::api_key_methods;
use crate::model::{ModelError, Turn, WireFormat};
use crate::options::{ToolChoice, request_option_methods, shown_names, strict_method};
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
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    common: Common,
}

/// Builds an [`OpenAiClient`].
#[derive(Debug, Clone)]
#[must_use]
pub struct OpenAiBuilder {
    settings: Settings,
}

impl OpenAiBuilder {
    api_key_methods!(
        "Authorization: Bearer <key>",
        "as OpenAI's API wants",
        "[`key::vars::OPENAI`](crate::key::vars::OPENAI)"
    );
    http_builder_methods!(
        "`parallel_tool_calls`, `top_p`, `stop`, `response_format`",
        "`model`, `messages`, `tools` and the options below (`tool_choice`, `temperature`, `seed`, `max_tokens`)"
    );
    request_option_methods!("`temperature`", "`seed`", "`max_tokens`");
    strict_method!("strict mode for every tool whose schema allows it");
    /// Checks the base URL and builds the client.
    pub fn build(self) -> Result<OpenAiClient, ModelError> {
        Ok(OpenAiClient { common: self.settings.build(|base, _, _| format!("{base}/chat/completions"))? })
    }
}

impl OpenAiClient {
    /// A builder for `model` at `base_url`, the URL that ends before `/chat/completions` (e.g.
    /// `https://api.openai.com/v1`, `http://localhost:11434/v1`).
    pub fn builder(base_url: impl Into<String>, model: impl Into<String>) -> OpenAiBuilder {
        OpenAiBuilder { settings: Settings::new(base_url.into(), model.into()) }
    }

    /// A client with the default limits and no API key.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Result<OpenAiClient, ModelError> {
        OpenAiClient::builder(base_url, model).build()
    }

    client_accessors!("`/chat/completions`");

    /// The request body of one turn: the conversation, the tools, and the options set on the builder (a
    /// named [`ToolChoice`] as `{"type": "function", "function": {"name": <wire name>}}`, an allowed subset as
    /// `{"type": "allowed_tools", "allowed_tools": {"mode": "auto" | "required", "tools": [{"type": "function",
    /// "function": {"name": <wire name>}}, ...]}}` with the full tool list; no `tool_choice` when the turn has no
    /// tools).
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] when the turn's [`ToolChoice`] names a tool the turn does not have, or requires a
    /// call in a turn without tools.
    pub fn request_body(&self, turn: &Turn<'_>) -> Result<Value, ModelError> {
        let mut body = self.common.body(true);
        let conversation = wire::conversation(turn.tools, WireFormat::OpenAiChat, turn.messages);
        body.insert("messages".into(), Value::Array(conversation.messages));
        let codec = self.common.request.codec(turn, Provider::OpenAiChat)?;
        let tools = codec.tool_list();
        if !tools.is_empty() {
            // One copy of each tool's shared rendering, straight into the body.
            body.insert("tools".into(), Value::Array(tools.to_vec()));
        }
        if let Some(choice) = self.common.request.choice(turn)?
            && !tools.is_empty()
        {
            let choice = match choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": codec.shown_name(&name)}}),
                ToolChoice::Allowed { tools, mode } => {
                    let tools: Vec<Value> = shown_names(&codec, &tools)
                        .into_iter()
                        .map(|name| json!({"type": "function", "function": {"name": name}}))
                        .collect();
                    json!({"type": "allowed_tools", "allowed_tools": {"mode": mode.as_str(), "tools": tools}})
                }
            };
            body.insert("tool_choice".into(), choice);
        }
        if let Some(t) = self.common.request.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(seed) = self.common.request.seed {
            body.insert("seed".into(), json!(seed));
        }
        if let Some(n) = self.common.request.max_tokens {
            body.insert("max_tokens".into(), json!(n));
        }
        if self.common.stream {
            self.common.stream_field(&mut body);
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        Ok(Value::Object(body))
    }
}

chat_model!(OpenAiClient, "openai-compatible", "openai", Auth::Bearer, &[], WireFormat::OpenAiChat);
