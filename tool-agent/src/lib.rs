//! keel's agent loop: a model proposes tool calls, keel's [`Run`](keel_tools_core::runs::Run) decides what runs, and the
//! results go back to the model, until it answers or the run's rules stop it.
//!
//! One trait, six models, one loop:
//!
//! | model | speaks | through | call names | `arguments` | key header |
//! |---|---|---|---|---|---|
//! | [`OllamaClient`] | Ollama `POST /api/chat` | the Ollama [`Codec`](keel_tools_core::Codec) | as registered | object; `id` generated when missing | `Authorization: Bearer` |
//! | [`OpenAiClient`] | Chat Completions `POST {base}/chat/completions` (OpenAI, Ollama's `/v1`, llama.cpp, vLLM, ...) | the OpenAI Chat codec | wire names, mapped back | JSON text | `Authorization: Bearer` |
//! | [`ResponsesClient`] | OpenAI Responses `POST {base}/responses` | the OpenAI Responses codec | wire names, mapped back | JSON text | `Authorization: Bearer` |
//! | [`AnthropicClient`] | Anthropic Messages `POST {base}/v1/messages` | the Anthropic codec | wire names, mapped back | object | `x-api-key` |
//! | [`GeminiClient`] | Gemini `POST {base}/models/{model}:generateContent` | the Gemini codec | wire names, mapped back | object; `id` generated when missing | `x-goog-api-key` |
//! | [`Replay`] | recorded responses of any of these, JSON Lines | (recorded) | as above | as above | |
//!
//! The clients find the assistant message in a response body; the codec of the turn's view lists the tools, reads
//! the calls and writes the replies, so what the model is shown and what it sends back meet in one object.
//!
//! [`Agent::run`] is the only loop. It sends the conversation and exactly the executor's view, runs each reply's
//! calls through [`Run::process_batch`](keel_tools_core::runs::Run::process_batch) (a decision after every
//! observation, the rest of a batch not executed after a terminal decision, steps counting executed calls only),
//! appends the results in the provider's reply format (written by its codec) and asks again, until the model
//! answers without tool calls (`done`), the decider stops the run, or `max_turns` is reached (`error`). A request
//! that fails with a 429, a 5xx, a broken connection or a timeout is retried as the [`RetryPolicy`] says, and
//! never runs a call twice; each answer's tokens ([`Usage`](keel_tools_core::events::Usage)) are logged.
//!
//! ```no_run
//! use keel_tools_agent::{Agent, Message, OllamaClient};
//! use keel_tools_core::{Executor, Registry};
//! use keel_tools_core::runs::Run;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = Registry::from_inventory()?;
//! let view = registry.view().tag("incident").build()?;
//! let mut run = Run::new(Executor::new(view)?);
//! let model = OllamaClient::new("http://localhost:11434", "qwen3")?;
//! let mut messages = vec![Message::system("You are the on-call assistant."), Message::user("What is INC-001?")];
//! let outcome = Agent::new(model).max_turns(6).run(&mut run, &mut messages).await?;
//! println!("{} ({}): {}", outcome.terminal, outcome.reason, outcome.answer.unwrap_or_default());
//! for event in run.log().events() {
//!     println!("{}", event.display_line());
//! }
//! # Ok(()) }
//! ```
//!
//! # Streaming
//!
//! Every client takes `stream(true)` on its builder: the answer arrives as server-sent events (JSON Lines for
//! Ollama), each text and tool-call delta goes to [`Agent::on_stream`] as a [`StreamEvent`], and once the stream
//! says it is complete the answer is folded into the body the API would have sent whole and read by the same
//! parser. A call runs only after that, when its arguments are complete and valid; a stream cut short is a
//! [`ModelError::Stream`] worth a retry.
//!
//! Everything is bounded: model turns (`max_turns`), each request (`timeout`, `connect_timeout`), each response
//! body (`max_response_bytes`), and the run's own step and retry limits. Failures of the HTTP layer and malformed
//! responses are [`ModelError`] values, never panics.
//!
//! # Features
//!
//! | feature | default | what it brings |
//! |---|---|---|
//! | `http` | yes | the HTTP clients of the model APIs ([`OllamaClient`], [`OpenAiClient`], [`ResponsesClient`], [`AnthropicClient`], [`GeminiClient`]), over reqwest; without it, the loop for models of your own ([`ChatModel`], [`Replay`]) with no HTTP client compiled |
//! | `rustls` | yes | HTTPS, through reqwest's rustls backend with a TLS configuration of each client's own (rustls with the aws-lc-rs provider, Mozilla's roots from webpki-roots, and the builders' `add_root_certificate`); nothing is installed process-wide. Without it (`default-features = false, features = ["http"]`) only `http://` base URLs work, which is enough for a local Ollama |
//! | `otel` | no | a `chat {model}` span per model turn, after the GenAI semantic conventions (model, provider, token usage, error type), with keel-tools-core's `otel` |
//! | `stub` | no | [`stub::StubServer`], a local HTTP server answering from recorded responses, for tests |
#![cfg_attr(docsrs, feature(doc_cfg))]
// Without `http`, the wire code the HTTP clients share with the replay (request writing, stream framing, request
// options) is compiled but partly unused.
#![cfg_attr(not(feature = "http"), allow(dead_code))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod agent;
#[cfg(feature = "http")]
mod anthropic;
mod api;
mod choice;
#[cfg(feature = "http")]
mod client;
pub mod deferral;
#[cfg(feature = "http")]
mod gemini;
#[cfg(feature = "http")]
mod http;
#[cfg(feature = "http")]
pub mod key;
mod model;
#[cfg(feature = "http")]
mod ollama;
#[cfg(feature = "http")]
mod openai;
mod options;
#[cfg(feature = "otel")]
mod otel;
mod replay;
#[cfg(feature = "http")]
mod responses;
mod retry;
mod stream;
mod stream_event;
#[cfg(feature = "stub")]
pub mod stub;
mod wire;

pub use agent::{Agent, AgentError, AgentOutcome, transcript};
#[cfg(feature = "http")]
pub use anthropic::{ANTHROPIC_VERSION, AnthropicBuilder, AnthropicClient, DEFAULT_MAX_TOKENS};
pub use deferral::ToolSearch;
#[cfg(feature = "http")]
pub use gemini::{GeminiBuilder, GeminiClient};
#[cfg(feature = "http")]
pub use http::HttpLimits;
#[cfg(feature = "http")]
pub use key::ApiKey;
pub use model::{AssistantMessage, BoxFuture, ChatModel, Message, Mode, ModelError, Turn, WireFormat};
#[cfg(feature = "http")]
pub use ollama::{OllamaBuilder, OllamaClient};
#[cfg(feature = "http")]
pub use openai::{OpenAiBuilder, OpenAiClient};
pub use options::{AllowedMode, ChoicePolicy, ToolChoice};
pub use replay::{Replay, ReplayOrigin, SeenTurn};
#[cfg(feature = "http")]
pub use responses::{ResponsesBuilder, ResponsesClient};
pub use retry::RetryPolicy;
pub use stream_event::{StreamEvent, StreamSink};
