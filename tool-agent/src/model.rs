//! The model side of the loop: [`ChatModel`] (one turn), the provider-neutral [`Message`]s of a conversation, and
//! [`ModelError`].

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde_json::{Value, json};
use tool_core::{ToolCall, ToolResult, ToolView};

/// The future a [`ChatModel`] returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Whether a reply came from a model or from a recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// A model answered over the network.
    Live,
    /// A recorded response was replayed ([`crate::Replay`]); no model was involved.
    Replay,
}

impl Mode {
    /// `live` or `replay`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Live => "live",
            Mode::Replay => "replay",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The wire format an assistant message arrived in (and is echoed back in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WireFormat {
    /// Ollama `/api/chat`: tool names as registered, `arguments` an object.
    Ollama,
    /// OpenAI Chat Completions: wire names (`incident-search`), `arguments` JSON text.
    OpenAiChat,
}

/// What the model said in one turn.
#[derive(Debug, Clone, PartialEq)]
pub struct AssistantMessage {
    /// The text (empty when the model only called tools).
    pub content: String,
    /// The tool calls, in order: ids filled in where the server sent none (deterministic, see
    /// [`tool_core::ToolCall::generated_id`]), names as the registry knows them (wire names mapped back).
    pub calls: Vec<ToolCall>,
    /// The message in its provider's format, as received, with generated ids filled in; echoed back verbatim
    /// in the next request.
    pub wire: Value,
    /// The format of `wire`.
    pub format: WireFormat,
    /// Whether a model or a recording produced it.
    pub mode: Mode,
}

/// One message of a conversation, independent of the provider.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Message {
    /// Instructions for the model.
    System(String),
    /// What the user asked.
    User(String),
    /// What the model answered.
    Assistant(AssistantMessage),
    /// The answer to one tool call (sent as `role: tool`).
    Tool(ToolResult),
}

impl Message {
    /// A system message.
    pub fn system(text: impl Into<String>) -> Message {
        Message::System(text.into())
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Message {
        Message::User(text.into())
    }

    /// The provider-neutral JSON form (for logs and transcripts).
    pub fn to_json(&self) -> Value {
        match self {
            Message::System(c) => json!({"role": "system", "content": c}),
            Message::User(c) => json!({"role": "user", "content": c}),
            Message::Assistant(a) => json!({
                "role": "assistant",
                "mode": a.mode.as_str(),
                "content": a.content,
                "tool_calls": a.calls.iter().map(call_json).collect::<Vec<_>>(),
            }),
            Message::Tool(r) => {
                let mut v = r.to_json();
                if let Value::Object(m) = &mut v {
                    m.insert("role".into(), Value::String("tool".into()));
                }
                v
            }
        }
    }

    /// One line for a transcript: `user: ...`, `assistant (replay): calls ...`, `tool: call-1 name -> ok ...`.
    pub fn display_line(&self) -> String {
        match self {
            Message::System(c) => format!("system: {}", shorten(c, 200)),
            Message::User(c) => format!("user: {}", shorten(c, 200)),
            Message::Assistant(a) if a.calls.is_empty() => {
                format!("assistant ({}): {}", a.mode, shorten(&a.content, 400))
            }
            Message::Assistant(a) => {
                let calls: Vec<String> = a
                    .calls
                    .iter()
                    .map(|c| {
                        let args = match c.arguments() {
                            Ok(v) => v.to_string(),
                            Err(e) => format!("<{e}>"),
                        };
                        format!("{} {} {}", c.id(), c.name(), shorten(&args, 120))
                    })
                    .collect();
                let text = if a.content.trim().is_empty() {
                    String::new()
                } else {
                    format!("{} | ", shorten(&a.content, 200))
                };
                format!("assistant ({}): {text}tool calls: {}", a.mode, calls.join("; "))
            }
            Message::Tool(r) => {
                let outcome = match &r.error() {
                    None => format!("ok {}", shorten(&r.content_text(), 160)),
                    Some(e) => format!("{} {}: {}", if r.executed { "error" } else { "rejected" }, e.code, e.message),
                };
                format!("tool: {} {} -> {outcome}", r.call_id, r.tool_name)
            }
        }
    }
}

fn call_json(c: &ToolCall) -> Value {
    json!({
        "id": c.id(),
        "name": c.name(),
        "arguments": match c.arguments() {
            Ok(v) => v.clone(),
            Err(e) => json!({"$unusable": e.to_string()}),
        },
    })
}

/// `text` cut to about `max` characters, on one line.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    let one_line = text.replace('\n', " ⏎ ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut s: String = one_line.chars().take(max).collect();
        s.push('…');
        s
    }
}

/// What one turn is given: the conversation so far and the tools the model may call.
#[derive(Debug, Clone, Copy)]
pub struct Turn<'a> {
    /// Every message so far, oldest first.
    pub messages: &'a [Message],
    /// The tools: exactly the executor's view, rendered in the model's own format.
    pub tools: &'a ToolView,
}

impl Turn<'_> {
    /// How many tool calls the conversation already holds: the first index for calls of this turn, so generated
    /// ids stay unique (and deterministic) across turns.
    pub fn calls_so_far(&self) -> usize {
        self.messages
            .iter()
            .map(|m| match m {
                Message::Assistant(a) => a.calls.len(),
                _ => 0,
            })
            .sum()
    }
}

/// A chat model: one turn in (the conversation and the tools), one assistant message out.
///
/// Implementations never panic on what a server sends: a transport failure, a non-success status or a body that
/// is not a well-formed response is a [`ModelError`].
pub trait ChatModel: Send + Sync {
    /// Whether replies come from a model or a recording.
    fn mode(&self) -> Mode;

    /// A short description for transcripts, e.g. `ollama qwen3 at http://localhost:11434`.
    fn label(&self) -> String;

    /// Runs one turn.
    fn chat<'a>(&'a self, turn: Turn<'a>) -> BoxFuture<'a, Result<AssistantMessage, ModelError>>;

    /// The model's name and its provider (`openai`, `ollama`), for telemetry (`gen_ai.request.model`,
    /// `gen_ai.provider.name`); `None` when no model is asked (a replay).
    fn telemetry(&self) -> Option<(&str, &'static str)> {
        None
    }
}

impl<M: ChatModel + ?Sized> ChatModel for &M {
    fn mode(&self) -> Mode {
        (**self).mode()
    }
    fn label(&self) -> String {
        (**self).label()
    }
    fn chat<'a>(&'a self, turn: Turn<'a>) -> BoxFuture<'a, Result<AssistantMessage, ModelError>> {
        (**self).chat(turn)
    }
    fn telemetry(&self) -> Option<(&str, &'static str)> {
        (**self).telemetry()
    }
}

impl<M: ChatModel + ?Sized> ChatModel for Box<M> {
    fn mode(&self) -> Mode {
        (**self).mode()
    }
    fn label(&self) -> String {
        (**self).label()
    }
    fn chat<'a>(&'a self, turn: Turn<'a>) -> BoxFuture<'a, Result<AssistantMessage, ModelError>> {
        (**self).chat(turn)
    }
    fn telemetry(&self) -> Option<(&str, &'static str)> {
        (**self).telemetry()
    }
}

/// Why a turn produced no assistant message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ModelError {
    /// The client is misconfigured (a base URL that is not `http(s)://...`, HTTPS without TLS support).
    Config {
        /// What is wrong.
        message: String,
    },
    /// The server could not be reached (connection refused, DNS, TLS).
    Connect {
        /// The request URL.
        url: String,
        /// The transport's description.
        message: String,
    },
    /// The request did not complete in time.
    Timeout {
        /// The request URL.
        url: String,
        /// The configured limit.
        after: Duration,
    },
    /// The server answered with a non-success status.
    Status {
        /// The request URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's error message, or the start of the body.
        message: String,
    },
    /// The response body exceeded the configured limit.
    TooLarge {
        /// The request URL.
        url: String,
        /// The limit in bytes.
        limit: usize,
    },
    /// Another transport failure.
    Http {
        /// The request URL.
        url: String,
        /// The transport's description.
        message: String,
    },
    /// The server reported an error inside a success response.
    Server {
        /// Its message.
        message: String,
    },
    /// The response is not a well-formed chat response.
    Malformed {
        /// What is wrong, e.g. "the response has no `message` object".
        message: String,
    },
    /// A replay script has no response left for this turn.
    ReplayExhausted {
        /// The 1-based turn that found nothing.
        turn: usize,
        /// How many responses the script holds.
        responses: usize,
    },
    /// A replay script could not be read.
    Replay {
        /// The 1-based line, or 0 for the whole file.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

impl ModelError {
    pub(crate) fn malformed(message: impl Into<String>) -> ModelError {
        ModelError::Malformed { message: message.into() }
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::Config { message } => write!(f, "model client configuration: {message}"),
            ModelError::Connect { url, message } => write!(f, "cannot reach {url}: {message}"),
            ModelError::Timeout { url, after } => {
                write!(f, "{url} did not answer within {} ms", after.as_millis())
            }
            ModelError::Status { url, status, message } => write!(f, "{url} answered {status}: {message}"),
            ModelError::TooLarge { url, limit } => {
                write!(f, "the response from {url} is larger than the limit of {limit} bytes")
            }
            ModelError::Http { url, message } => write!(f, "request to {url} failed: {message}"),
            ModelError::Server { message } => write!(f, "the model server reported an error: {message}"),
            ModelError::Malformed { message } => write!(f, "malformed model response: {message}"),
            ModelError::ReplayExhausted { turn, responses } => {
                write!(f, "the replay script has {responses} recorded response(s) and turn {turn} asked for one more")
            }
            ModelError::Replay { line: 0, message } => write!(f, "replay script: {message}"),
            ModelError::Replay { line, message } => write!(f, "replay script, line {line}: {message}"),
        }
    }
}

impl std::error::Error for ModelError {}
