//! Request options both clients send: which tool the model must call ([`ToolChoice`], per turn with
//! [`ChoicePolicy`]), temperature, seed and the most tokens to generate.
//!
//! [`ToolChoice::Allowed`] allows a subset of the tools with the tool list unchanged; its docs give each API's
//! form.

use std::fmt;
use std::sync::Arc;

use keel_tools_core::Provider;

pub use crate::choice::{AllowedMode, ToolChoice};
use crate::model::{Message, ModelError, Turn};

/// Which [`ToolChoice`] each turn gets.
///
/// A forced choice on every turn makes a loop that can only end by the turn limit (the model must call a tool
/// again after every result), so the usual policy forces the first turn and lets the model decide afterwards:
/// [`ChoicePolicy::first_then`].
#[derive(Clone)]
#[non_exhaustive]
pub enum ChoicePolicy {
    /// The same choice on every turn.
    Every(ToolChoice),
    /// `first` on the first turn (no assistant message yet), `then` on every later turn.
    FirstThen {
        /// The first turn's.
        first: ToolChoice,
        /// Every later turn's.
        then: ToolChoice,
    },
    /// Chosen by a function of the turn.
    Custom(Arc<dyn Fn(&Turn<'_>) -> ToolChoice + Send + Sync>),
}

impl fmt::Debug for ChoicePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChoicePolicy::Every(c) => f.debug_tuple("Every").field(c).finish(),
            ChoicePolicy::FirstThen { first, then } => {
                f.debug_struct("FirstThen").field("first", first).field("then", then).finish()
            }
            ChoicePolicy::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

impl ChoicePolicy {
    /// `first` on the first turn, `then` afterwards.
    pub fn first_then(first: ToolChoice, then: ToolChoice) -> ChoicePolicy {
        ChoicePolicy::FirstThen { first, then }
    }

    /// The choice for `turn`.
    pub fn choice(&self, turn: &Turn<'_>) -> ToolChoice {
        match self {
            ChoicePolicy::Every(c) => c.clone(),
            ChoicePolicy::FirstThen { first, then } => {
                if is_first(turn) {
                    first.clone()
                } else {
                    then.clone()
                }
            }
            ChoicePolicy::Custom(f) => f(turn),
        }
    }
}

/// Whether the model has not answered yet in this conversation.
fn is_first(turn: &Turn<'_>) -> bool {
    !turn.messages.iter().any(|m| matches!(m, Message::Assistant(_)))
}

/// The options a client sends with every turn; each is left out of the request when unset, so the server's
/// default applies.
#[derive(Debug, Clone, Default)]
pub(crate) struct RequestOptions {
    pub(crate) choice: Option<ChoicePolicy>,
    pub(crate) temperature: Option<f64>,
    pub(crate) seed: Option<i64>,
    pub(crate) max_tokens: Option<u32>,
    pub(crate) strict: keel_tools_core::Strict,
    pub(crate) tool_search: crate::deferral::ToolSearch,
}

impl RequestOptions {
    /// The turn's choice: the one the turn carries ([`Turn::with_choice`], set by the agent), else the policy's;
    /// its named tools checked against the turn's tools: a name the model was not given could never be called.
    pub(crate) fn choice(&self, turn: &Turn<'_>) -> Result<Option<ToolChoice>, ModelError> {
        let choice = match (turn.choice, &self.choice) {
            (Some(choice), _) => choice.clone(),
            (None, Some(policy)) => policy.choice(turn),
            (None, None) => return Ok(None),
        };
        let unknown = |name: &str| {
            ModelError::config(format!(
                "tool_choice names `{name}`, which is not among this turn's tools ({})",
                turn.tools.names().collect::<Vec<_>>().join(", ")
            ))
        };
        match &choice {
            ToolChoice::Tool(name) if turn.tools.get(name).is_none() => Err(unknown(name)),
            ToolChoice::Allowed { tools, .. } if tools.is_empty() => Err(ModelError::config(
                "tool_choice allows no tool; ToolChoice::None is the choice that lets the model call none",
            )),
            ToolChoice::Allowed { tools, .. } if tools.iter().any(|t| turn.tools.get(t).is_none()) => {
                Err(unknown(tools.iter().find(|t| turn.tools.get(t).is_none()).map_or("", String::as_str)))
            }
            ToolChoice::Tool(_) | ToolChoice::Required | ToolChoice::Allowed { mode: AllowedMode::Required, .. }
                if turn.tools.is_empty() =>
            {
                Err(ModelError::config("tool_choice requires a tool call, but this turn has no tools"))
            }
            _ => Ok(Some(choice)),
        }
    }
}

impl RequestOptions {
    /// The codec of `provider` for the turn's tools, with the client's strict-mode setting; under
    /// [`Strict::Required`](keel_tools_core::Strict::Required), an error naming every tool that cannot be strict,
    /// and why.
    pub(crate) fn codec(&self, turn: &Turn<'_>, provider: Provider) -> Result<keel_tools_core::Codec, ModelError> {
        let codec = turn.tools.codec(provider).with_strict(self.strict);
        if self.strict == keel_tools_core::Strict::Required {
            let not = codec.not_strict();
            if !not.is_empty() {
                let each: Vec<String> = not.iter().map(|(tool, why)| format!("`{tool}`: {why}")).collect();
                return Err(ModelError::config(format!(
                    "Strict::Required, but {} of this turn's tools cannot be strict for {}: {}",
                    not.len(),
                    provider.as_str(),
                    each.join("; ")
                )));
            }
        }
        Ok(codec)
    }
}

/// The builder method of the strict-mode setting, for the clients whose API has a strict mode.
#[cfg(feature = "http")]
macro_rules! strict_method {
    ($default:literal) => {
        #[doc = concat!("Whether the tools are sent in the API's strict mode ([`Strict`](keel_tools_core::Strict)); the default, `Strict::Auto`, is ", $default, ".")]
        ///
        /// With [`Strict::Required`](keel_tools_core::Strict::Required) a turn whose tools are not all strict is
        /// not sent: it fails with [`ModelError::Config`](crate::ModelError::Config), naming each tool and why
        /// ([`Codec::not_strict`](keel_tools_core::Codec::not_strict)). `keel check` names them ahead of time.
        pub fn strict(mut self, strict: keel_tools_core::Strict) -> Self {
            self.settings.request.strict = strict;
            self
        }
    };
}
#[cfg(feature = "http")]
pub(crate) use strict_method;

/// The builder method of the tool-search setting, for the clients whose API has a tool search of its own.
#[cfg(feature = "http")]
macro_rules! tool_search_method {
    ($what:literal) => {
        #[doc = concat!("How the model finds deferred tools ([`ToolSearch`](crate::ToolSearch); see [`crate::deferral`]). The default, `ToolSearch::Native`, sends ", $what, "; `ToolSearch::Keel` sends the tools shown so far and keel's `search_tools` tool instead.")]
        pub fn tool_search(mut self, search: crate::deferral::ToolSearch) -> Self {
            self.settings.request.tool_search = search;
            self
        }
    };
}
#[cfg(feature = "http")]
pub(crate) use tool_search_method;

/// The allowed tools' names as `provider` is shown them, in the order given, each once.
pub(crate) fn shown_names(codec: &keel_tools_core::Codec, tools: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(tools.len());
    for name in tools {
        let shown = codec.shown_name(name);
        if !out.contains(&shown) {
            out.push(shown);
        }
    }
    out
}

/// The turn's tool list, or (for [`ToolChoice::Allowed`], on an API with no form for it) only the allowed tools'
/// entries, with a warning the first time `warned` sees it.
pub(crate) fn tools_sent(
    codec: &keel_tools_core::Codec,
    choice: Option<&ToolChoice>,
    warned: &std::sync::atomic::AtomicBool,
) -> Vec<serde_json::Value> {
    let tools = codec.tool_list();
    match choice {
        Some(ToolChoice::Allowed { tools: allowed, .. }) => {
            if let Some(loss) = choice.and_then(|c| c.loss(codec.provider()))
                && !warned.swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::warn!(provider = codec.provider().as_str(), "{}", loss.message);
            }
            codec
                .view()
                .iter()
                .zip(tools.iter())
                .filter(|(def, _)| allowed.iter().any(|a| a == def.name()))
                .map(|(_, entry)| entry.clone())
                .collect()
        }
        _ => tools.to_vec(),
    }
}

/// The builder methods of the request options, shared by every client's builder (a `settings: Settings` field).
#[cfg(feature = "http")]
macro_rules! request_option_methods {
    ($temperature:literal, $seed:literal, $max_tokens:literal) => {
        /// The tool choice on every turn ([`ChoicePolicy::Every`](crate::ChoicePolicy::Every)).
        pub fn tool_choice(mut self, choice: crate::options::ToolChoice) -> Self {
            self.settings.request.choice = Some(crate::options::ChoicePolicy::Every(choice));
            self
        }
        /// The tool choice per turn, e.g. `ChoicePolicy::first_then(ToolChoice::tool("incident.lookup"),
        /// ToolChoice::Auto)`.
        pub fn choice_policy(mut self, policy: crate::options::ChoicePolicy) -> Self {
            self.settings.request.choice = Some(policy);
            self
        }
        #[doc = concat!("The sampling temperature (sent as ", $temperature, ").")]
        pub fn temperature(mut self, temperature: f64) -> Self {
            self.settings.request.temperature = Some(temperature);
            self
        }
        #[doc = concat!("The sampling seed, for repeatable answers where the server supports it (sent as ", $seed, ").")]
        pub fn seed(mut self, seed: i64) -> Self {
            self.settings.request.seed = Some(seed);
            self
        }
        #[doc = concat!("The most tokens to generate in a turn (sent as ", $max_tokens, ").")]
        pub fn max_tokens(mut self, max_tokens: u32) -> Self {
            self.settings.request.max_tokens = Some(max_tokens);
            self
        }
    };
}
#[cfg(feature = "http")]
pub(crate) use request_option_methods;
