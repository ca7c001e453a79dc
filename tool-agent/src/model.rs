//! The model side of the loop: [`ChatModel`] (one turn), the provider-neutral [`Message`]s of a conversation, and
//! [`ModelError`].

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use keel_tools_core::events::Usage;
use keel_tools_core::results::same_error;
use keel_tools_core::{ToolCall, ToolResult, ToolView};
use serde_json::{Value, json};

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
    /// OpenAI Responses: the `output` items (an array), `function_call` items with `arguments` JSON text.
    OpenAiResponses,
    /// Anthropic Messages: `{"role": "assistant", "content": [blocks]}`, `tool_use` blocks with object `input`.
    Anthropic,
    /// Gemini `generateContent`: a candidate's `{"role": "model", "parts": [...]}`, `functionCall` parts.
    Gemini,
}

impl WireFormat {
    /// The codec's provider of this format.
    pub fn provider(self) -> keel_tools_core::Provider {
        use keel_tools_core::Provider;
        match self {
            WireFormat::Ollama => Provider::Ollama,
            WireFormat::OpenAiChat => Provider::OpenAiChat,
            WireFormat::OpenAiResponses => Provider::OpenAiResponses,
            WireFormat::Anthropic => Provider::Anthropic,
            WireFormat::Gemini => Provider::Gemini,
        }
    }
}

/// What the model said in one turn.
#[derive(Debug, Clone, PartialEq)]
pub struct AssistantMessage {
    /// The text (empty when the model only called tools).
    pub content: String,
    /// The tool calls, in order: ids filled in where the server sent none (deterministic, see
    /// [`keel_tools_core::ToolCall::generated_id`]), names as the registry knows them (wire names mapped back).
    pub calls: Vec<ToolCall>,
    /// The message in its provider's format, as received, with generated ids filled in; echoed back verbatim
    /// in the next request.
    pub wire: Value,
    /// The format of `wire`.
    pub format: WireFormat,
    /// Whether a model or a recording produced it.
    pub mode: Mode,
    /// The tokens the provider counted for this turn, when the response said.
    pub usage: Option<Usage>,
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

/// The error message of an error body: `{"error": "..."}` (Ollama) or `{"error": {"message": "..."}}` (OpenAI,
/// Anthropic, Gemini).
pub(crate) fn error_message(body: &Value) -> Option<String> {
    match body.get("error")? {
        Value::String(s) => Some(s.clone()),
        Value::Object(e) => Some(
            e.get("message")
                .and_then(Value::as_str)
                .map_or_else(|| Value::Object(e.clone()).to_string(), str::to_owned),
        ),
        Value::Null => None,
        other => Some(other.to_string()),
    }
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

/// What one turn is given: the conversation so far, the tools the model may call, and where a streamed answer's
/// events go.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct Turn<'a> {
    /// Every message so far, oldest first.
    pub messages: &'a [Message],
    /// The tools: exactly the executor's view, rendered in the model's own format.
    pub tools: &'a ToolView,
    /// Where a client that streams sends its [`StreamEvent`](crate::StreamEvent)s.
    pub stream: Option<&'a dyn crate::stream_event::StreamSink>,
    /// The tool choice of this turn, when the caller has settled it ([`Turn::with_choice`]): a client sends it
    /// instead of asking its own [`ChoicePolicy`](crate::ChoicePolicy). `None`: the client's policy decides.
    pub choice: Option<&'a crate::choice::ToolChoice>,
    /// The run's whole view when it defers tools ([`Turn::with_deferred`]): a client whose API has a tool search of
    /// its own sends it, the deferred tools marked, instead of [`tools`](Turn::tools) ([`crate::deferral`]).
    pub deferred: Option<&'a ToolView>,
    /// Whether this turn goes out with the provider's own tool search (set by the client).
    pub(crate) native_search: bool,
}

impl fmt::Debug for Turn<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Turn")
            .field("messages", &self.messages.len())
            .field("tools", &self.tools.names().collect::<Vec<_>>())
            .field("stream", &self.stream.is_some())
            .field("choice", &self.choice)
            .field("deferred", &self.deferred.map(ToolView::len))
            .finish()
    }
}

impl<'a> Turn<'a> {
    /// A turn over `messages` with `tools`, its stream events going nowhere, its tool choice left to the client.
    pub fn new(messages: &'a [Message], tools: &'a ToolView) -> Turn<'a> {
        Turn { messages, tools, stream: None, choice: None, deferred: None, native_search: false }
    }

    /// The same turn with its tool choice settled: the client sends `choice` (`None`: the client's policy
    /// decides). The [`Agent`](crate::Agent) settles each turn's choice with [`ChatModel::tool_choice`] and
    /// holds the turn's calls to the same choice.
    #[must_use]
    pub fn with_choice(mut self, choice: Option<&'a crate::choice::ToolChoice>) -> Turn<'a> {
        self.choice = choice;
        self
    }

    /// The same turn in a run whose view `all` defers tools: [`tools`](Turn::tools) are those shown so far
    /// ([`Run::shown`](keel_tools_core::runs::Run::shown)), and a client whose API has a tool search of its own
    /// sends `all` with the deferred tools marked instead. The [`Agent`](crate::Agent) sets it.
    #[must_use]
    pub fn with_deferred(mut self, all: Option<&'a ToolView>) -> Turn<'a> {
        self.deferred = all.filter(|v| v.has_deferred());
        self
    }

    /// The same turn, its stream events going to `sink`.
    #[must_use]
    pub fn with_stream(mut self, sink: &'a dyn crate::stream_event::StreamSink) -> Turn<'a> {
        self.stream = Some(sink);
        self
    }
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

    /// The tool choice this model sends in `turn` (from its [`ChoicePolicy`](crate::ChoicePolicy), checked
    /// against the turn's tools), or `None` when it sends none; the default is `None`.
    ///
    /// The [`Agent`](crate::Agent) asks once per turn, hands the answer to [`ChatModel::chat`] with the turn
    /// ([`Turn::with_choice`]), and holds the turn's calls to it ([`ToolChoice::allowed_tools`](crate::ToolChoice::allowed_tools)):
    /// what the model was allowed and what may run come from one value. A model that wraps another forwards this.
    ///
    /// # Errors
    ///
    /// [`ModelError::Config`] for a choice that names a tool the turn does not have, or requires a call in a turn
    /// without tools.
    fn tool_choice(&self, turn: &Turn<'_>) -> Result<Option<crate::choice::ToolChoice>, ModelError> {
        let _ = turn;
        Ok(None)
    }

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
    fn tool_choice(&self, turn: &Turn<'_>) -> Result<Option<crate::choice::ToolChoice>, ModelError> {
        (**self).tool_choice(turn)
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
    fn tool_choice(&self, turn: &Turn<'_>) -> Result<Option<crate::choice::ToolChoice>, ModelError> {
        (**self).tool_choice(turn)
    }
    fn telemetry(&self) -> Option<(&str, &'static str)> {
        (**self).telemetry()
    }
}

/// Why a turn produced no assistant message.
///
/// A variant that comes from another error (the transport's, a JSON parser's, the file system's) keeps it as
/// `source`, returned by [`std::error::Error::source`]; it is shared (`Arc`) so the error stays `Clone`. The
/// [`Display`](fmt::Display) text still holds what the source said, as it did before the source was kept. Two errors
/// are equal when their fields are, sources compared by the text of their chains.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ModelError {
    /// The client is misconfigured (a base URL that is not `http(s)://...`, HTTPS without TLS support), or the
    /// HTTP client or the request could not be built.
    Config {
        /// What is wrong.
        message: String,
        /// The error it comes from (reqwest's when the HTTP client cannot be built, serde_json's when the request
        /// cannot be serialized); `None` for a configuration refused by the client itself.
        source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// The server could not be reached (connection refused, DNS, TLS).
    Connect {
        /// The request URL.
        url: String,
        /// The transport's error (a `reqwest::Error` for the bundled clients).
        source: Arc<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The request did not complete in time.
    Timeout {
        /// The request URL.
        url: String,
        /// The configured limit.
        after: Duration,
        /// The transport's error (a `reqwest::Error` for the bundled clients).
        source: Arc<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The server answered with a non-success status.
    Status {
        /// The request URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's error message, or the start of the body; for a redirect (3xx, which the bundled clients
        /// never follow), where it pointed and that it was not followed.
        message: String,
        /// The wait the server asked for before a retry (`retry-after-ms`, `Retry-After`, on a 429 the rate-limit
        /// reset headers, or Gemini's `RetryInfo` in the body), when it named one. The bundled clients read a wait
        /// of more than a day (however large the number) as a day, and a negative, infinite or NaN one as none.
        retry_after: Option<Duration>,
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
        /// The transport's error (a `reqwest::Error` for the bundled clients).
        source: Arc<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A streamed answer reported an error in one of its events, or ended before it said it was complete.
    Stream {
        /// What the stream said, or that it was cut short.
        message: String,
        /// Whether trying again may succeed: the stream was cut short, or the provider said it was overloaded.
        retryable: bool,
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
        /// The parser's error when one said so (serde_json's for a body that is not JSON, the codec's
        /// [`MessageError`](keel_tools_core::codecs::MessageError) for an assistant message of the wrong shape); `None` otherwise.
        source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
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
        /// The error it comes from (`std::io::Error` for a file that cannot be read, serde_json's for a line that
        /// is not JSON); `None` for a line that is JSON but no response.
        source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
    },
}

impl ModelError {
    pub(crate) fn config(message: impl Into<String>) -> ModelError {
        ModelError::Config { message: message.into(), source: None }
    }

    pub(crate) fn malformed(message: impl Into<String>) -> ModelError {
        ModelError::Malformed { message: message.into(), source: None }
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::Config { message, .. } => write!(f, "model client configuration: {message}"),
            ModelError::Connect { url, source } => {
                write!(f, "cannot reach {url}: ")?;
                if let Some(cause) = connect_cause(url, &**source) {
                    write!(f, "{cause}: ")?;
                }
                write_chain(f, &**source)
            }
            ModelError::Timeout { url, after, source } => {
                let connecting = chain(&**source).any(is_connect_error);
                if connecting {
                    write!(
                        f,
                        "{url}: nothing at {} accepted a connection within {} ms",
                        authority(url),
                        after.as_millis()
                    )
                } else {
                    write!(f, "{url} did not answer within {} ms", after.as_millis())
                }
            }
            ModelError::Status { url, status, message, retry_after } => {
                match status {
                    401 => f.write_str("the API key was refused, or none was sent and one is needed: ")?,
                    403 => f.write_str("the API key was refused for this request (it may lack access to it): ")?,
                    _ => {}
                }
                write!(f, "{url} answered {status}: {message}")?;
                match retry_after {
                    Some(wait) => write!(f, " (it asked to wait {} before trying again)", wait_text(*wait)),
                    None => Ok(()),
                }
            }
            ModelError::TooLarge { url, limit } => {
                write!(f, "the response from {url} is larger than the limit of {limit} bytes")
            }
            ModelError::Http { url, source } => {
                write!(f, "request to {url} failed: ")?;
                write_chain(f, &**source)
            }
            ModelError::Server { message } => write!(f, "the model server reported an error: {message}"),
            ModelError::Stream { message, .. } => write!(f, "the streamed answer failed: {message}"),
            ModelError::Malformed { message, .. } => write!(f, "malformed model response: {message}"),
            ModelError::ReplayExhausted { turn, responses } => {
                write!(f, "the replay script has {responses} recorded response(s) and turn {turn} asked for one more")
            }
            ModelError::Replay { line: 0, message, .. } => write!(f, "replay script: {message}"),
            ModelError::Replay { line, message, .. } => write!(f, "replay script, line {line}: {message}"),
        }
    }
}

impl std::error::Error for ModelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ModelError::Connect { source, .. }
            | ModelError::Timeout { source, .. }
            | ModelError::Http { source, .. } => Some(&**source),
            ModelError::Config { source, .. }
            | ModelError::Malformed { source, .. }
            | ModelError::Replay { source, .. } => source.as_deref().map(|s| s as &(dyn std::error::Error + 'static)),
            ModelError::Status { .. }
            | ModelError::TooLarge { .. }
            | ModelError::Stream { .. }
            | ModelError::Server { .. }
            | ModelError::ReplayExhausted { .. } => None,
        }
    }
}

impl PartialEq for ModelError {
    fn eq(&self, other: &ModelError) -> bool {
        use ModelError as E;
        match (self, other) {
            (E::Config { message: m1, source: s1 }, E::Config { message: m2, source: s2 })
            | (E::Malformed { message: m1, source: s1 }, E::Malformed { message: m2, source: s2 }) => {
                m1 == m2 && same_optional_source(s1.as_deref(), s2.as_deref())
            }
            (E::Connect { url: u1, source: s1 }, E::Connect { url: u2, source: s2 })
            | (E::Http { url: u1, source: s1 }, E::Http { url: u2, source: s2 }) => {
                u1 == u2 && same_error(&**s1, &**s2)
            }
            (E::Timeout { url: u1, after: a1, source: s1 }, E::Timeout { url: u2, after: a2, source: s2 }) => {
                u1 == u2 && a1 == a2 && same_error(&**s1, &**s2)
            }
            (
                E::Status { url: u1, status: c1, message: m1, retry_after: w1 },
                E::Status { url: u2, status: c2, message: m2, retry_after: w2 },
            ) => u1 == u2 && c1 == c2 && m1 == m2 && w1 == w2,
            (E::TooLarge { url: u1, limit: l1 }, E::TooLarge { url: u2, limit: l2 }) => u1 == u2 && l1 == l2,
            (E::Server { message: m1 }, E::Server { message: m2 }) => m1 == m2,
            (E::Stream { message: m1, retryable: r1 }, E::Stream { message: m2, retryable: r2 }) => {
                m1 == m2 && r1 == r2
            }
            (E::ReplayExhausted { turn: t1, responses: r1 }, E::ReplayExhausted { turn: t2, responses: r2 }) => {
                t1 == t2 && r1 == r2
            }
            (E::Replay { line: l1, message: m1, source: s1 }, E::Replay { line: l2, message: m2, source: s2 }) => {
                l1 == l2 && m1 == m2 && same_optional_source(s1.as_deref(), s2.as_deref())
            }
            _ => false,
        }
    }
}

impl Eq for ModelError {}

fn same_optional_source(
    a: Option<&(dyn std::error::Error + Send + Sync + 'static)>,
    b: Option<&(dyn std::error::Error + Send + Sync + 'static)>,
) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => same_error(a, b),
        _ => false,
    }
}

/// `e` and its sources, in turn.
fn chain<'a>(e: &'a (dyn std::error::Error + 'static)) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |e| e.source())
}

/// `e` and its sources, in turn, each `io::Error` followed by the error it wraps (and that one's): an `io::Error`'s
/// `source` skips the error it wraps and gives that error's source, and the transport wraps rustls' errors so,
/// twice over.
fn deep_chain<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    chain(e).flat_map(|e| {
        std::iter::successors(Some(e), |e| {
            let inner = e.downcast_ref::<std::io::Error>()?.get_ref()?;
            Some(inner as &(dyn std::error::Error + 'static))
        })
    })
}

/// Whether `e` is the HTTP client's error of a connection that could not be made.
fn is_connect_error(e: &(dyn std::error::Error + 'static)) -> bool {
    #[cfg(feature = "http")]
    return e.downcast_ref::<reqwest::Error>().is_some_and(reqwest::Error::is_connect);
    #[cfg(not(feature = "http"))]
    return {
        let _ = e;
        false
    };
}

/// `host:port` of `url` (the port its scheme implies when it names none), or `url` when it is not a URL (or, without
/// the `http` feature, always: there is no URL parser then).
fn authority(url: &str) -> String {
    #[cfg(feature = "http")]
    if let Ok(u) = reqwest::Url::parse(url) {
        return match (u.host_str(), u.port_or_known_default()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            _ => url.to_owned(),
        };
    }
    url.to_owned()
}

/// The host of `url`; `url` itself when it is not a URL (or without the `http` feature).
fn host_of(url: &str) -> String {
    #[cfg(feature = "http")]
    if let Some(host) = reqwest::Url::parse(url).ok().and_then(|u| u.host_str().map(str::to_owned)) {
        return host;
    }
    url.to_owned()
}

/// Why a connection to `url` failed, in words a person knows, when the chain of `source` says: a TLS handshake that
/// failed (rustls' error, which the transport keeps inside `io::Error`s), a refused connection, a name that does
/// not resolve. `None` when it says nothing of these.
fn connect_cause(url: &str, source: &(dyn std::error::Error + 'static)) -> Option<String> {
    let host = || host_of(url);
    let https = url.get(..8).is_some_and(|s| s.eq_ignore_ascii_case("https://"));
    for e in deep_chain(source) {
        #[cfg(feature = "rustls")]
        {
            if let Some(tls) = e.downcast_ref::<rustls::Error>() {
                let why = match tls {
                    rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
                        "is the server speaking https?"
                    }
                    rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented => {
                        "its certificate was not accepted"
                    }
                    rustls::Error::AlertReceived(_) => "the server refused it",
                    rustls::Error::PeerIncompatible(_) => {
                        "the server offers no TLS version or cipher this client accepts"
                    }
                    _ => "see the cause",
                };
                return Some(format!("TLS handshake with {} failed ({why})", host()));
            }
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => {
                    return Some(format!("connection refused: nothing listens at {}", authority(url)));
                }
                // Only the TLS handshake reads during a connect: a server that hangs up then speaks no TLS.
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset if https => {
                    return Some(format!(
                        "TLS handshake with {} failed (the server closed the connection; is it speaking https?)",
                        host()
                    ));
                }
                _ => {}
            }
        }
        // hyper-util's connector names a resolver failure "dns error".
        if e.to_string() == "dns error" {
            return Some(format!("the host name {} does not resolve", host()));
        }
    }
    None
}

/// A wait as a person reads it: `250 ms`, `3 s`, `1.5 s`, `a day or more`.
fn wait_text(wait: Duration) -> String {
    if wait >= Duration::from_secs(24 * 60 * 60) {
        "a day or more".to_owned()
    } else if wait < Duration::from_secs(1) {
        format!("{} ms", wait.as_millis())
    } else if wait.subsec_millis() == 0 {
        format!("{} s", wait.as_secs())
    } else {
        format!("{:.1} s", wait.as_secs_f64())
    }
}

/// Writes `e` and its sources joined by `: `, each part once ([`keel_tools_core::results::error_chain`]).
fn write_chain(f: &mut fmt::Formatter<'_>, e: &(dyn std::error::Error + 'static)) -> fmt::Result {
    f.write_str(&keel_tools_core::results::error_chain(e))
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;

    /// An error with a cause, as reqwest's are: its own text says little.
    #[derive(Debug)]
    struct Outer(std::io::Error);

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("error sending request")
        }
    }

    impl Error for Outer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    fn refused() -> Arc<dyn Error + Send + Sync> {
        Arc::new(Outer(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused")))
    }

    #[test]
    fn transport_errors_keep_their_source_and_name_its_chain() {
        let e = ModelError::Connect { url: "http://h/api/chat".into(), source: refused() };
        assert_eq!(
            e.to_string(),
            "cannot reach http://h/api/chat: connection refused: nothing listens at h:80: error sending request: \
             connection refused"
        );
        let outer = e.source().and_then(|s| s.downcast_ref::<Outer>()).expect("the source as given");
        assert_eq!(outer.0.kind(), std::io::ErrorKind::ConnectionRefused);
        let e = ModelError::Http { url: "http://h".into(), source: refused() };
        assert_eq!(e.to_string(), "request to http://h failed: error sending request: connection refused");
        assert!(e.source().is_some_and(|s| s.is::<Outer>()));
        let e = ModelError::Timeout { url: "http://h".into(), after: Duration::from_secs(2), source: refused() };
        assert_eq!(e.to_string(), "http://h did not answer within 2000 ms");
        assert!(e.source().is_some_and(|s| s.is::<Outer>()));
    }

    #[test]
    fn a_refused_key_and_a_wait_are_named() {
        let status =
            |status, retry_after| ModelError::Status { url: "u".into(), status, message: "m".into(), retry_after };
        assert_eq!(
            status(401, None).to_string(),
            "the API key was refused, or none was sent and one is needed: u answered 401: m"
        );
        assert!(status(403, None).to_string().starts_with("the API key was refused for this request"));
        assert_eq!(status(500, None).to_string(), "u answered 500: m");
        let waits = [(250, "250 ms"), (3000, "3 s"), (1500, "1.5 s"), (86_400_000, "a day or more")];
        for (ms, text) in waits {
            let e = status(429, Some(Duration::from_millis(ms)));
            assert_eq!(e.to_string(), format!("u answered 429: m (it asked to wait {text} before trying again)"));
        }
    }

    #[test]
    fn a_source_text_already_said_is_not_repeated() {
        let inner = std::io::Error::other("connection refused");
        let outer = std::io::Error::other(format!("tcp connect error: {inner}"));
        #[derive(Debug)]
        struct Pair(std::io::Error, std::io::Error);
        impl fmt::Display for Pair {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
        impl Error for Pair {
            fn source(&self) -> Option<&(dyn Error + 'static)> {
                Some(&self.1)
            }
        }
        let e = ModelError::Connect { url: "u".into(), source: Arc::new(Pair(outer, inner)) };
        assert_eq!(e.to_string(), "cannot reach u: tcp connect error: connection refused");
    }

    #[test]
    fn optional_sources() {
        let e = ModelError::config("the model name is empty");
        assert!(e.source().is_none());
        let json = serde_json::from_str::<Value>("{").unwrap_err();
        let e = ModelError::Config {
            message: format!("cannot serialize the request: {json}"),
            source: Some(Arc::new(json)),
        };
        assert!(e.source().is_some_and(|s| s.is::<serde_json::Error>()));
        assert!(ModelError::malformed("x").source().is_none());
        for e in [
            ModelError::Status { url: "u".into(), status: 500, message: "m".into(), retry_after: None },
            ModelError::TooLarge { url: "u".into(), limit: 1 },
            ModelError::Server { message: "m".into() },
            ModelError::ReplayExhausted { turn: 2, responses: 1 },
        ] {
            assert!(e.source().is_none(), "{e:?}");
        }
    }

    #[test]
    fn equality_compares_fields_and_the_text_of_sources() {
        let e = ModelError::Connect { url: "u".into(), source: refused() };
        assert_eq!(e, e.clone());
        assert_eq!(e, ModelError::Connect { url: "u".into(), source: refused() });
        assert_ne!(e, ModelError::Connect { url: "v".into(), source: refused() });
        let other = Arc::new(std::io::Error::other("error sending request"));
        assert_ne!(e, ModelError::Connect { url: "u".into(), source: other.clone() }, "the chains differ");
        assert_ne!(e, ModelError::Http { url: "u".into(), source: refused() });
        let replay =
            |source: Option<Arc<dyn Error + Send + Sync>>| ModelError::Replay { line: 1, message: "m".into(), source };
        assert_eq!(replay(None), replay(None));
        assert_ne!(replay(None), replay(Some(other.clone())));
        assert_eq!(replay(Some(other.clone())), replay(Some(Arc::new(std::io::Error::other("error sending request")))));
    }
}
