//! [`ResponsesClient`]: OpenAI's Responses API.

use keel_tools_core::Provider;
use serde_json::{Value, json};

use crate::client::{Common, Settings, chat_model, client_accessors};
use crate::http::{Auth, http_builder_methods};
use crate::key::api_key_methods;
use crate::model::{ModelError, Turn, WireFormat};
use crate::options::{ToolChoice, request_option_methods, shown_names, strict_method, tool_search_method};
use crate::wire;

/// A client for `POST {base}/responses`.
///
/// Everything goes through the OpenAI Responses [`Codec`](keel_tools_core::Codec) of the turn's view: the tools are
/// sent as `{"type": "function", "name", "description", "parameters", "strict"}` under their wire names;
/// `function_call` output items come back with `arguments` as JSON text, and the codec maps the names back; each
/// result goes back as a `function_call_output` item. The conversation is sent whole as `input` each turn (the
/// model's output items echoed verbatim), so nothing depends on what the server stored.
///
/// The API has no seed: a client with one is refused by `build`.
///
/// ```no_run
/// # async fn demo() -> Result<(), keel_tools_agent::ModelError> {
/// let model = keel_tools_agent::ResponsesClient::builder("https://api.openai.com/v1", "gpt-4.1-mini")
///     .api_key_from_env(keel_tools_agent::key::vars::OPENAI)?
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ResponsesClient {
    common: Common,
}

/// Builds a [`ResponsesClient`].
#[derive(Debug, Clone)]
#[must_use]
pub struct ResponsesBuilder {
    settings: Settings,
}

impl ResponsesBuilder {
    api_key_methods!(
        "Authorization: Bearer <key>",
        "as OpenAI's API wants",
        "[`key::vars::OPENAI`](crate::key::vars::OPENAI)"
    );
    http_builder_methods!(
        "`parallel_tool_calls`, `reasoning`, `store`, `text`",
        "`model`, `input`, `tools` and the options below (`tool_choice`, `temperature`, `max_output_tokens`)"
    );
    request_option_methods!(
        "`temperature`",
        "nothing: the API has none, and `build` refuses it",
        "`max_output_tokens`"
    );
    strict_method!("strict mode for every tool whose schema allows it");
    tool_search_method!(
        "every function tool, the deferred ones with `\"defer_loading\": true`, and the hosted `tool_search` tool"
    );
    /// Checks the base URL and builds the client.
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] as for every client (the URL, the model name, the key's transport), and when a seed
    /// is set: the Responses API has none.
    pub fn build(self) -> Result<ResponsesClient, ModelError> {
        let common =
            self.settings.build_without_seed("OpenAI's Responses API", |base, _, _| format!("{base}/responses"))?;
        Ok(ResponsesClient { common })
    }
}

impl ResponsesClient {
    /// A builder for `model` at `base_url`, the URL that ends before `/responses` (`https://api.openai.com/v1`).
    pub fn builder(base_url: impl Into<String>, model: impl Into<String>) -> ResponsesBuilder {
        ResponsesBuilder { settings: Settings::new(base_url.into(), model.into()) }
    }

    client_accessors!("`/responses`");

    /// The request body of one turn: the conversation as `input` items, the tools, and the options set on the
    /// builder (a named [`ToolChoice`] as `{"type": "function", "name": <wire name>}`, an allowed subset as
    /// `{"type": "allowed_tools", "mode": "auto" | "required", "tools": [{"type": "function", "name": <wire
    /// name>}, ...]}` with the full tool list; no `tool_choice` when the turn has no tools).
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] when the turn's [`ToolChoice`] names a tool the turn does not have, or requires a
    /// call in a turn without tools.
    pub fn request_body(&self, turn: &Turn<'_>) -> Result<Value, ModelError> {
        let turn = &crate::deferral::prepare(*turn, self.common.request.tool_search, Provider::OpenAiResponses);
        let mut body = self.common.body(true);
        let conversation = wire::conversation(turn.tools, WireFormat::OpenAiResponses, turn.messages);
        body.insert("input".into(), Value::Array(conversation.messages));
        let codec = self.common.request.codec(turn, Provider::OpenAiResponses)?;
        let tools = codec.tool_list();
        if !tools.is_empty() {
            let mut entries = tools.to_vec();
            if turn.native_search {
                entries = crate::deferral::native_entries(turn.tools, entries, Provider::OpenAiResponses);
            }
            body.insert("tools".into(), Value::Array(entries));
        }
        let request = &self.common.request;
        if let Some(choice) = request.choice(turn)?
            && !tools.is_empty()
        {
            let choice = match choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool(name) => json!({"type": "function", "name": codec.shown_name(&name)}),
                ToolChoice::Allowed { tools, mode } => {
                    let tools: Vec<Value> = shown_names(&codec, &tools)
                        .into_iter()
                        .map(|name| json!({"type": "function", "name": name}))
                        .collect();
                    json!({"type": "allowed_tools", "mode": mode.as_str(), "tools": tools})
                }
            };
            body.insert("tool_choice".into(), choice);
        }
        if let Some(t) = request.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(n) = request.max_tokens {
            body.insert("max_output_tokens".into(), json!(n));
        }
        self.common.stream_field(&mut body);
        Ok(Value::Object(body))
    }
}

chat_model!(ResponsesClient, "openai-responses", "openai", Auth::Bearer, &[], WireFormat::OpenAiResponses);
