//! [`GeminiClient`]: Gemini's `generateContent`.

use keel_tools_core::Provider;
use serde_json::{Map, Value, json};

use crate::client::{Common, Settings, chat_model, client_accessors};
use crate::http::{Auth, http_builder_methods};
use crate::key::api_key_methods;
use crate::model::{ModelError, Turn, WireFormat};
use crate::options::{AllowedMode, ToolChoice, request_option_methods, shown_names};
use crate::wire;

/// A client for `POST {base}/models/{model}:generateContent` (streaming: `:streamGenerateContent?alt=sse`).
///
/// Everything goes through the Gemini [`Codec`](keel_tools_core::Codec) of the turn's view: the tools are sent as
/// one `functionDeclarations` list under their wire names, with the schema adapted to what Gemini takes;
/// `functionCall` parts come back with object `args`, and the codec maps the names back; the results of one turn
/// go back as `functionResponse` parts of one `user` content. System messages become `systemInstruction`.
///
/// The key goes in `x-goog-api-key`.
///
/// ```no_run
/// # async fn demo() -> Result<(), keel_tools_agent::ModelError> {
/// let model = keel_tools_agent::GeminiClient::builder(
///     "https://generativelanguage.googleapis.com/v1beta",
///     "gemini-2.5-flash",
/// )
/// .api_key_from_env(keel_tools_agent::key::vars::GEMINI)?
/// .build()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct GeminiClient {
    common: Common,
}

/// Builds a [`GeminiClient`].
#[derive(Debug, Clone)]
#[must_use]
pub struct GeminiBuilder {
    settings: Settings,
}

impl GeminiBuilder {
    api_key_methods!(
        "x-goog-api-key: <key>",
        "as the Gemini API wants",
        "[`key::vars::GEMINI`](crate::key::vars::GEMINI) or [`key::vars::GOOGLE`](crate::key::vars::GOOGLE)"
    );
    http_builder_methods!(
        "`safetySettings`, `cachedContent`",
        "`contents`, `systemInstruction`, `tools`, `toolConfig` and `generationConfig` (from the options below)"
    );
    request_option_methods!(
        "`generationConfig.temperature`",
        "`generationConfig.seed`",
        "`generationConfig.maxOutputTokens`"
    );
    /// Checks the base URL and builds the client. The model may be given as `gemini-2.5-flash` or
    /// `models/gemini-2.5-flash`.
    pub fn build(self) -> Result<GeminiClient, ModelError> {
        let common = self.settings.build(|base, model, stream| {
            let model = model.trim().trim_start_matches("models/");
            if stream {
                format!("{base}/models/{model}:streamGenerateContent?alt=sse")
            } else {
                format!("{base}/models/{model}:generateContent")
            }
        })?;
        Ok(GeminiClient { common })
    }
}

impl GeminiClient {
    /// A builder for `model` at `base_url`, the URL before `/models/...` (e.g.
    /// `https://generativelanguage.googleapis.com/v1beta`).
    pub fn builder(base_url: impl Into<String>, model: impl Into<String>) -> GeminiBuilder {
        GeminiBuilder { settings: Settings::new(base_url.into(), model.into()) }
    }

    client_accessors!("`:generateContent`");

    /// The request body of one turn: `contents`, `systemInstruction`, the tools as one `functionDeclarations`
    /// entry, the [`ToolChoice`] as `toolConfig.functionCallingConfig` (`AUTO`, `NONE`, `ANY`, or `ANY` with
    /// `allowedFunctionNames` for a named tool; an allowed subset as `allowedFunctionNames` with `VALIDATED` for
    /// [`AllowedMode::Auto`] and `ANY` for [`AllowedMode::Required`], the tool list unchanged; none when the turn
    /// has no tools), and `generationConfig`.
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] when the turn's [`ToolChoice`] names a tool the turn does not have, or requires a
    /// call in a turn without tools.
    pub fn request_body(&self, turn: &Turn<'_>) -> Result<Value, ModelError> {
        let mut body = self.common.body(false);
        let conversation = wire::conversation(turn.tools, WireFormat::Gemini, turn.messages);
        if let Some(system) = conversation.system {
            body.insert("systemInstruction".into(), json!({"parts": [{"text": system}]}));
        }
        body.insert("contents".into(), Value::Array(conversation.messages));
        let codec = turn.tools.codec(Provider::Gemini);
        let tools = codec.tool_list();
        if !tools.is_empty() {
            body.insert("tools".into(), json!([{"functionDeclarations": tools.to_vec()}]));
        }
        let request = &self.common.request;
        if let Some(choice) = request.choice(turn)?
            && !tools.is_empty()
        {
            let config = match choice {
                ToolChoice::Auto => json!({"mode": "AUTO"}),
                ToolChoice::None => json!({"mode": "NONE"}),
                ToolChoice::Required => json!({"mode": "ANY"}),
                ToolChoice::Tool(name) => json!({"mode": "ANY", "allowedFunctionNames": [codec.shown_name(&name)]}),
                // `allowedFunctionNames` goes only with `ANY` and `VALIDATED`; `VALIDATED` lets the model answer in
                // text, as `auto` does, and holds its calls to the allowed functions.
                ToolChoice::Allowed { tools, mode } => json!({
                    "mode": match mode {
                        AllowedMode::Auto => "VALIDATED",
                        AllowedMode::Required => "ANY",
                    },
                    "allowedFunctionNames": shown_names(&codec, &tools),
                }),
            };
            body.insert("toolConfig".into(), json!({"functionCallingConfig": config}));
        }
        let mut generation = match body.remove("generationConfig") {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        if let Some(t) = request.temperature {
            generation.insert("temperature".into(), json!(t));
        }
        if let Some(seed) = request.seed {
            generation.insert("seed".into(), json!(seed));
        }
        if let Some(n) = request.max_tokens {
            generation.insert("maxOutputTokens".into(), json!(n));
        }
        if !generation.is_empty() {
            body.insert("generationConfig".into(), Value::Object(generation));
        }
        Ok(Value::Object(body))
    }
}

chat_model!(GeminiClient, "gemini", "gcp.gemini", Auth::Header("x-goog-api-key"), &[], WireFormat::Gemini);
