//! Request options both clients send: which tool the model must call ([`ToolChoice`], per turn with
//! [`ChoicePolicy`]), temperature, seed and the most tokens to generate.

use std::fmt;
use std::sync::Arc;

use crate::model::{Message, ModelError, Turn};

/// Whether, and which, tool the model must call in a turn.
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
}

impl ToolChoice {
    /// The choice that names the tool `name`.
    pub fn tool(name: impl Into<String>) -> ToolChoice {
        ToolChoice::Tool(name.into())
    }
}

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
}

impl RequestOptions {
    /// The turn's choice, its named tool checked against the turn's tools: a name the model was not given could
    /// never be called.
    pub(crate) fn choice(&self, turn: &Turn<'_>) -> Result<Option<ToolChoice>, ModelError> {
        let Some(policy) = &self.choice else { return Ok(None) };
        let choice = policy.choice(turn);
        match &choice {
            ToolChoice::Tool(name) if turn.tools.get(name).is_none() => Err(ModelError::config(format!(
                "tool_choice names `{name}`, which is not among this turn's tools ({})",
                turn.tools.names().collect::<Vec<_>>().join(", ")
            ))),
            ToolChoice::Tool(_) | ToolChoice::Required if turn.tools.is_empty() => {
                Err(ModelError::config("tool_choice requires a tool call, but this turn has no tools"))
            }
            _ => Ok(Some(choice)),
        }
    }
}

/// The builder methods of the request options, shared by every client's builder (a `settings: Settings` field).
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
pub(crate) use request_option_methods;
