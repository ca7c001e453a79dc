//! [`ToolChoice`]: whether, and which, tool the model must call in a turn, and what it allows.

use keel_tools_core::Provider;
use keel_tools_core::codecs::{Loss, LossKind};

/// Whether, and which, tool the model must call in a turn.
///
/// # A subset of the tools, with the prompt cache kept
///
/// Sending a narrower tool list on some turns changes the start of the request, and with it the providers' prompt
/// caches (the tools come first in what they cache). [`ToolChoice::Allowed`] keeps the list as it is and names the
/// subset the model may call this turn, in the form each API has for it:
///
/// | client | `ToolChoice::allowed(names, AllowedMode::Auto)` | `AllowedMode::Required` | the tool list |
/// |---|---|---|---|
/// | [`OpenAiClient`](crate::OpenAiClient) | `{"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [{"type": "function", "function": {"name": <wire name>}}, ...]}}` | `"mode": "required"` | unchanged |
/// | [`ResponsesClient`](crate::ResponsesClient) | `{"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": <wire name>}, ...]}` | `"mode": "required"` | unchanged |
/// | [`GeminiClient`](crate::GeminiClient) | `functionCallingConfig: {"mode": "VALIDATED", "allowedFunctionNames": [...]}` | `"mode": "ANY"` | unchanged |
/// | [`AnthropicClient`](crate::AnthropicClient) | `{"type": "auto"}` | `{"type": "any"}` | only the allowed tools |
/// | [`OllamaClient`](crate::OllamaClient) | (no `tool_choice`) | refused: `/api/chat` cannot force a call | only the allowed tools |
///
/// Gemini takes `allowedFunctionNames` only with the modes `ANY` and `VALIDATED`; `VALIDATED` is the one that lets
/// the model answer in text, as `auto` does. Anthropic's Messages API and Ollama's `/api/chat` have no such form:
/// their clients send only the allowed tools that turn, which costs the cache, and say so once per client with a
/// `tracing` warning; [`ToolChoice::loss`] reports it as data.
///
/// Whatever the API, the [`Agent`](crate::Agent) holds the turn to its choice: a call of a tool the choice does
/// not allow is refused exactly as a call of a tool the view does not hold (`unknown_tool`, never run), though the
/// tool is in the view ([`ToolChoice::allowed_tools`],
/// [`Run::process_batch_allowed`](keel_tools_core::runs::Run::process_batch_allowed)). The restriction comes from
/// the very choice the client sent: the agent asks the model for the turn's choice once
/// ([`ChatModel::tool_choice`](crate::ChatModel::tool_choice)) and hands it to the client with the turn
/// ([`Turn::with_choice`](crate::Turn::with_choice)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides (the servers' default).
    Auto,
    /// The model must answer in text.
    None,
    /// The model must call some tool.
    Required,
    /// The model must call this tool, given by its registered name (`incident.lookup`); the client sends it as
    /// the provider is shown it (`incident-lookup` for OpenAI).
    Tool(String),
    /// The model may call only these tools, given by their registered names, while it is still shown every tool
    /// of the turn (so the request's tool list, and the provider's prompt cache, stay as they were); `mode` says
    /// whether it must call one. See [above](ToolChoice#a-subset-of-the-tools-with-the-prompt-cache-kept) for each API's form, and
    /// [`ToolChoice::allowed`].
    Allowed {
        /// The registered names of the tools the model may call (`incident.lookup`).
        tools: Vec<String>,
        /// Whether the model must call one of them.
        mode: AllowedMode,
    },
}

/// Whether a model given [`ToolChoice::Allowed`] must call one of the allowed tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AllowedMode {
    /// The model may call one of the allowed tools, or answer in text.
    Auto,
    /// The model must call one or more of the allowed tools.
    Required,
}

impl AllowedMode {
    /// `auto` or `required`, as OpenAI's `allowed_tools` spells the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            AllowedMode::Auto => "auto",
            AllowedMode::Required => "required",
        }
    }
}

impl ToolChoice {
    /// The choice that names the tool `name`.
    pub fn tool(name: impl Into<String>) -> ToolChoice {
        ToolChoice::Tool(name.into())
    }

    /// The choice that allows only the tools `names` (registered names) this turn, with every tool still shown.
    ///
    /// ```
    /// use keel_tools_agent::{AllowedMode, ChoicePolicy, OpenAiClient, ToolChoice};
    ///
    /// // The first turn may only look things up; later turns may call any tool. Every turn is sent the same
    /// // tool list.
    /// let first = ToolChoice::allowed(["incident.lookup", "incident.search"], AllowedMode::Required);
    /// let model = OpenAiClient::builder("http://localhost:11434/v1", "qwen3")
    ///     .choice_policy(ChoicePolicy::first_then(first.clone(), ToolChoice::Auto))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(first.allowed_tools(), Some(&["incident.lookup".to_owned(), "incident.search".to_owned()][..]));
    /// ```
    pub fn allowed(names: impl IntoIterator<Item = impl Into<String>>, mode: AllowedMode) -> ToolChoice {
        ToolChoice::Allowed { tools: names.into_iter().map(Into::into).collect(), mode }
    }

    /// The tools a call may name in a turn with this choice, when the choice restricts them: the allowed tools of
    /// [`ToolChoice::Allowed`]; `None` (no restriction beyond the view) for every other choice. The
    /// [`Agent`](crate::Agent) refuses a call outside them as `unknown_tool`.
    ///
    /// [`ToolChoice::Tool`] and [`ToolChoice::None`] say which call must come (or that none should), not which
    /// tools may run: OpenAI-compatible servers that do not honour `tool_choice` answer them with other calls,
    /// which run as before.
    pub fn allowed_tools(&self) -> Option<&[String]> {
        match self {
            ToolChoice::Allowed { tools, .. } => Some(tools),
            _ => None,
        }
    }

    /// What sending this choice to `provider` costs, when the provider has no form for it: for
    /// [`ToolChoice::Allowed`] on Anthropic and Ollama, whose clients send only the allowed tools that turn (the
    /// tool list changes, so the prompt cache does not hold across it). `tool` is `*` and `at` is `/tool_choice`.
    ///
    /// ```
    /// use keel_tools_agent::{AllowedMode, ToolChoice};
    /// use keel_tools_core::Provider;
    ///
    /// let choice = ToolChoice::allowed(["incident.lookup"], AllowedMode::Auto);
    /// assert!(choice.loss(Provider::OpenAiChat).is_none());
    /// let loss = choice.loss(Provider::Anthropic).unwrap();
    /// assert!(loss.message.contains("only the allowed tools"));
    /// ```
    pub fn loss(&self, provider: Provider) -> Option<Loss> {
        let ToolChoice::Allowed { .. } = self else { return None };
        let api = match provider {
            Provider::Anthropic => "Anthropic's Messages API",
            Provider::Ollama => "Ollama's /api/chat",
            _ => return None,
        };
        Some(Loss {
            provider,
            tool: "*".to_owned(),
            at: "/tool_choice".to_owned(),
            kind: LossKind::Adapted,
            message: format!(
                "{api} has no choice that allows a subset of the tools: the turn is sent only the allowed tools, so \
                 the tool list differs from the other turns' and the provider's prompt cache is not reused from the \
                 tools on; the executor refuses any other tool"
            ),
        })
    }
}
